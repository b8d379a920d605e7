/* Models, contexts, decoding, lw_sample: declared in include/llamaweb.h (public API). This header stays for the sources that include it. */
#ifndef LW_ENGINE_H
#define LW_ENGINE_H

#include "llamaweb.h"

#endif
