/* Chat templates (the Jinja interpreter lives in src/chat/jinja*.c): declared in include/llamaweb.h (public API). This header stays for the sources that include it. */
#ifndef LW_CHAT_H
#define LW_CHAT_H

#include "llamaweb.h"

#endif
