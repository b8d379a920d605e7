/* Samplers: declared in include/llamaweb.h (public API). This header stays for the sources that include it. */
#ifndef LW_SAMPLE_H
#define LW_SAMPLE_H

#include "llamaweb.h"

#endif
