"""The findings: tables, plots and formats from records (``report``, ``html``, ``effective``), claims decided from the
committed evidence (``claims``), the generated sections of the docs (``docs``) and a run against the reference
(``reference``). They read records, never models."""
