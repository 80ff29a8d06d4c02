-- Before the analyst views: DuckDB functions the views use, in PostgreSQL, so that one text of each view
-- (studio/store/views.sql, analytics_views.sql) serves both stores. See dialect.py for the rest.

-- date_diff('second', a, b): whole seconds between two times, as DuckDB counts them.
CREATE OR REPLACE FUNCTION date_diff(part TEXT, a TIMESTAMPTZ, b TIMESTAMPTZ) RETURNS BIGINT
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN part IN ('second', 'seconds', 's')
              THEN CAST(extract(epoch FROM date_trunc('second', b) - date_trunc('second', a)) AS BIGINT) END
$$;

-- seconds_between(a, b): the store's own macro on DuckDB (schema.sql), the same count as date_diff's.
CREATE OR REPLACE FUNCTION seconds_between(a TIMESTAMPTZ, b TIMESTAMPTZ) RETURNS BIGINT
LANGUAGE sql IMMUTABLE AS $$ SELECT date_diff('second', a, b) $$;

-- list_contains(list, value): is the value an element of the list.
CREATE OR REPLACE FUNCTION list_contains(list ANYARRAY, value ANYELEMENT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE AS $$ SELECT value = ANY(list) $$;
