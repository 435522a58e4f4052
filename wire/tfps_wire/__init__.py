"""Every message that crosses a process boundary between the operator (``tfps_operator``) and the trainer
(``tfps_trainer``): one TF-free schema each, imported by its writer and every reader
(docs/architecture.md, "Messages between processes"). Imports nothing but the standard library and
pydantic, so both sides and both images can load it."""
