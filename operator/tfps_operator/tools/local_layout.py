"""Where ``tfps run`` keeps a job's files on this machine (read by ``tfps run`` and ``tfps tensorboard
--workdir``): ``<workdir>/<namespace>/<job>/`` is the job's directory, as on its volume, plus:

* ``<workdir>/volumes/<claimName>/``: the claims its pods mount, shared by the jobs of the work directory;
* ``<job dir>/local/``: this machine's own: emptyDirs, ConfigMap and Secret files, each process's new root,
  and ``directories.json``: where the program's own directories (``spec.model.directories``) are here,
  ``{"checkpoints": ..., "savedModel": ..., "tensorboard": ...}``.
"""

VOLUMES_DIR = "volumes"
LOCAL_DIR = "local"
DIRECTORIES_RECORD = "directories.json"
