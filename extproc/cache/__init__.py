"""The semantic cache: an answer an upstream gave to a close-enough earlier request, served again
without touching a GPU.

- `keys`: what a request is cached under (tenant partition, conversation context, last user turn);
- `answers`: upstream answers (JSON or SSE) checked and reassembled for storing, hits rendered;
- `backends`: the store interface and the in-process store; `milvus`: the Milvus store;
- `embedding`: the cheap candidate embedding; `service`: lookup and store, as the servicer uses them.
"""
