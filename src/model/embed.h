/* Embeddings (internal): the hooks between contexts (context.c) and the embedding functions (embed.c).
 * Public API: lw_embed* in include/llamaweb.h. */
#ifndef LW_EMBED_H
#define LW_EMBED_H

#include "graph/graph.h"

/* Turns a model's decode graph into an embeddings graph: cut after the final norm (the node writing
 * "result_norm", llama.cpp's t_embd), whose output is kept for the caller (LW_T_OUTPUT). *embd gets that
 * tensor's index. LW_ERR_UNSUPPORTED when the graph has no such node. Call before planning. */
lw_status lw__embed_graph_cut(lw__graph *g, int32_t *embd);

/* 1 when the context was created with lw_context_params.embeddings (context.c). */
int lw__context_embeddings(const lw_context *c);

#endif
