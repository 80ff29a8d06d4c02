"""The analyst views in PostgreSQL: DuckDB's own view texts, with the one spelling PostgreSQL lacks rewritten.

The views are defined once (studio/store/views.sql, analytics_views.sql); here they are read and the
DuckDB-only spelling `CAST(<json> AS VARCHAR[])` becomes a text array built from the JSON array. The
functions DuckDB has and PostgreSQL lacks (`date_diff`, `list_contains`, and `seconds_between`, a macro of
the DuckDB store's schema.sql) are created by views.sql here.
"""

from __future__ import annotations

import re
from importlib import resources

_JSON_LIST = re.compile(r"CAST\(([^()]*?) AS VARCHAR\[\]\)")


def postgres_views() -> str:
    store = resources.files("studio.store")
    prelude = resources.files("studio.store.postgres").joinpath("views.sql").read_text()
    texts = [store.joinpath(name).read_text() for name in ("views.sql", "analytics_views.sql")]
    return prelude + "\n".join(_JSON_LIST.sub(r"ARRAY(SELECT jsonb_array_elements_text(\1))", t) for t in texts)
