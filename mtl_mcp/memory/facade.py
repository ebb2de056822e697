"""`Memory`: the one object every front door uses to record, recall and manage insights.

It composes the layers below: the insight table and its snapshot (`mtl_mcp.storage`), the
embedding model and the rankings (`mtl_mcp.index`), the lint (`mtl_mcp.text`). Each method
validates its arguments, does one thing, and raises only errors from `mtl_mcp.errors`.
Every method is safe to call from several threads; the table opens and the model loads on
first use.

With a team pool configured (`Settings.team_uri`, `mtl_mcp.memory.team`), recall, list,
get, rate and stats read both tiers, every result saying its `source`; recording, imports
and exports stay personal, and insights reach the pool only through `share`.

One concept a module, stacked in this order (each builds on the ones before it):

core         settings, tiers, the model, opening the store
reading      recall, preview, get, list, export, stats, vectors
recording    record, import, seed
curation     rate, revise, retire, forget, purge, share
bookkeeping  recalls for sessions, verdicts, session reports, history
upkeep       reindex, flush, backups, restore, close
consolidation merge paraphrases, retire what is superseded or unused, flag contradictions,
             undo (its decisions: consolidation_plan)
"""

from __future__ import annotations

from mtl_mcp.memory.consolidation import Consolidation
from mtl_mcp.memory.reading import LabelledVectors
from mtl_mcp.memory.recording import ImportProblem, ImportReport

__all__ = ["ImportProblem", "ImportReport", "LabelledVectors", "Memory"]


class Memory(Consolidation):
    """A store of abstract insights: record, recall, browse, rate, forget, back up.

    `on_change` is called with the memory after every change to the insights themselves
    (recorded, merged, imported, rated, forgotten, purged, restored; not recall counters),
    for a front door to keep what it derives from them in step.
    """
