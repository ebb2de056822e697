"""The index layer: how insights are found for a plan.

embedder    the local embedding model (onnxruntime errors translated here)
int8_graph  the default model's graph rewritten to keep its weights int8 at run time
methods     the recall methods `mtl-mcp eval` compares, and the plan's query vector
bm25        Okapi BM25 over insight texts
fusion      reciprocal-rank fusion of the dense and keyword rankings
categories  the category of a draft that left it out, by nearest centroid
clusters    paraphrases among insight vectors, for consolidation
"""
