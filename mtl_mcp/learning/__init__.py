"""The learning layer: from session transcripts, and the notes the assistants keep, to
stored insights.

transcripts  defensive, bounded readers and the digest sent to a model
discovery    the sessions and memory files a backfill finds on this machine
notes        a memory file or a project's instructions as the text a model reads
proposals    what the model returns and how it becomes lint-clean drafts
prompts      the judge, distill and repair prompts
backends     where the model calls go (the Anthropic API today)
distill      judge -> distill -> lint -> repair, over any backend
spend        token usage, prices and the daily budget
pipeline     the one pipeline: digest -> distill -> store, for every caller
spool        the job queue that loses nothing
worker       the detached queue worker
"""
