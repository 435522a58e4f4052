"""The user's tools, apart from the operator's own process: the ``tfps`` command line (:mod:`.cli`), the
Python client and the job-aware verbs (:mod:`.client`), ``tfps run`` (:mod:`.local`), ``tfps submit``,
``tfps convert`` and the code packer. They read and write jobs through the API server or run them on this
machine; the operator (``tfps operator``) imports none of them."""
