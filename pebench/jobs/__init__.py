"""The job machinery: what a command means (``plan``, ``suites``) and how it runs (``training``, ``sweep`` in this
process or on local workers, ``launch`` as a scheduler's job array, ``distributed`` under torchrun, ``runner`` for a
whole suite, ``tune`` for a learning-rate grid), with ``profile`` saying where the time went. Below the CLI, above the
core; nothing here prints but through a ``progress.Reporter``."""
