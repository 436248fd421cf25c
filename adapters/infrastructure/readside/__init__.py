"""The read side: the read model's tables on SQLite or PostgreSQL, how the projection writes
them, and every query that reads them (docs/architecture.md).

`model.ReadModel` is the handle the engine holds (`engine.view`); the modules beside it each
do one part: `dialect` (what differs between the two databases), `database` (connections
and transactions), `schema` (tables, indexes, upgrades), `positions` (tracking positions),
`writer` (rows and position in one transaction), `queries` (every read) and `rows` (table
rows into the row types readers get).
"""
