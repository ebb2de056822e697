"""The memory layer: `Memory`, the one object the layers above use to reach the store.

facade   Memory: record, import, recall, list, get, stats, rate, forget, purge,
         reindex, backups, vectors for the quality tools; one concept a module below it:
         core, reading, recording, curation, bookkeeping (the loop's), upkeep
ingest   validating, linting and deduplicating drafts into rows and merges
queries  recall, pages and counts over an in-memory snapshot
jsonl    the JSONL exchange format of `import` and `export`
listeners who hears of every change (the open dashboard's live feed)
consolidation, consolidation_plan, team_upkeep
         merging paraphrases, retiring superseded and unused lessons, flagging
         contradictions, undoing runs; the team pool's, under a lease
"""

from mtl_mcp.memory.facade import ImportReport, LabelledVectors, Memory

__all__ = ["ImportReport", "LabelledVectors", "Memory"]
