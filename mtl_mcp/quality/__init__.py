"""The quality layer: measuring and picturing the memory.

evaluation   retrieval quality on an evaluation set (`mtl-mcp eval`)
abstraction  how abstract a memory is: DBI, LISI, specificity
memory_map   a 2-D map of the embeddings (`mtl-mcp map`)
"""
