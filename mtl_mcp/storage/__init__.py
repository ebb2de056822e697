"""The storage layer: one LanceDB store on disk or object storage.

schema    the data format: the Arrow schema, table names, SQL literals
lance     connections, and LanceDB's errors translated by one table
table     InsightTable: open, migrate, snapshot, write with retries, compact, purge
snapshot  the in-memory rows and vector matrix of one table version
backup    backups, restores and the damage inspection behind `doctor`
locks     advisory file locks between processes on one machine
runs      consolidation runs, and what undoing each needs, as files beside the store
"""
