/* Tokenizers (vocabularies, tokenize, detokenize, streaming detokenizer): declared in include/llamaweb.h (public API). This header stays for the sources that include it. */
#ifndef LW_TOKENIZER_H
#define LW_TOKENIZER_H

#include "llamaweb.h"

#endif
