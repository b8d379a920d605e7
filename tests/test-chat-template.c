/* Chat templates: real model templates (tests/test-chat-fixtures.h) rendered for small conversations and
 * compared with expected prompts written by hand from each model's documented format, or taken from
 * llama.cpp's tests/test-chat-template.cpp (its Jinja expectations) where it lists one; then error cases
 * (raise_exception, syntax errors, limits) and allocator behaviour (no leaks, failing allocations). */
#include "chat/chat.h"
#include "test.h"
#include "test-chat-fixtures.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------------------------
 * Conversations
 * ------------------------------------------------------------------------------------------------------- */

/* system + user + assistant + user: the conversation of the task. */
static const lw_chat_message CONV_SMALL[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};
/* The same without the system message, for templates that reject one. */
static const lw_chat_message CONV_NOSYS[] = {
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
};
/* llama.cpp's test conversation (tests/test-chat-template.cpp), note the padded assistant reply. */
static const lw_chat_message CONV_LLAMACPP[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};
/* llama.cpp's conversation after its polyfill for templates without a system role (system + "\n" + user). */
static const lw_chat_message CONV_LLAMACPP_MERGED[] = {
    {"user", "You are a helpful assistant\nHello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};
/* A reasoning model's earlier turn keeps its thoughts in the content. */
static const lw_chat_message CONV_THINK[] = {
    {"system", "Be brief."},
    {"user", "What is 2+2?"},
    {"assistant", "<think>\nSimple arithmetic.\n</think>\n\n4"},
    {"user", "And 3+3?"},
};
/* ... and as the last message (a completed turn to be trained on / continued). */
static const lw_chat_message CONV_THINK_LAST[] = {
    {"user", "What is 2+2?"},
    {"assistant", "<think>\nSimple arithmetic.\n</think>\n\n4"},
};

#define CONV(x) x, sizeof(x) / sizeof(x[0])

/* 2025-03-05 13:45:07 UTC, for strftime_now (Llama 3.2's "Today Date"). */
#define FIXED_NOW 1741182307

#define DS_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"   /* <｜begin▁of▁sentence｜> */
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"     /* <｜end▁of▁sentence｜>   */
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"                                          /* <｜User｜>              */
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"                             /* <｜Assistant｜>         */

/* ---------------------------------------------------------------------------------------------------------
 * Template cases
 * ------------------------------------------------------------------------------------------------------- */

typedef struct chat_case {
    const char *name;               /* model / template                          */
    const char *tmpl;               /* template source                           */
    const char *bos, *eos;          /* special tokens passed to the template     */
    const lw_chat_message *msgs;    /* conversation                              */
    size_t n;                       /* its length                                */
    int add_generation_prompt;      /* 1: end with the assistant header          */
    int enable_thinking;            /* -1: undefined                             */
    const char *expected;           /* exact expected prompt                     */
} chat_case;

static const chat_case CASES[] = {
    /* --- Llama 3.1: date preamble ("26 Jul 2024" default), system message trimmed into the system turn */
    {"Llama-3.1-8B-Instruct", TMPL_LLAMA31, "<|begin_of_text|>", "<|eot_id|>", CONV(CONV_SMALL), 1, -1,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
     "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
     "You are a helpful assistant<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Llama-3.1-8B-Instruct (no generation prompt)", TMPL_LLAMA31, "<|begin_of_text|>", "<|eot_id|>",
     CONV(CONV_SMALL), 0, -1,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
     "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
     "You are a helpful assistant<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"},
    /* --- Llama 3.2: the date comes from strftime_now("%d %b %Y") */
    {"Llama-3.2-3B-Instruct", TMPL_LLAMA32, "<|begin_of_text|>", "<|eot_id|>", CONV(CONV_SMALL), 1, -1,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
     "Cutting Knowledge Date: December 2023\nToday Date: 05 Mar 2025\n\n"
     "You are a helpful assistant<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Llama-3.2-3B-Instruct (no system message)", TMPL_LLAMA32, "<|begin_of_text|>", "<|eot_id|>",
     CONV(CONV_NOSYS), 1, -1,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
     "Cutting Knowledge Date: December 2023\nToday Date: 05 Mar 2025\n\n<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    /* --- Qwen2.5: ChatML, with a default system prompt when none is given */
    {"Qwen2.5-7B-Instruct", TMPL_QWEN25, "", "<|im_end|>", CONV(CONV_SMALL), 1, -1,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
     "<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n"
     "<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Qwen2.5-7B-Instruct (default system prompt)", TMPL_QWEN25, "", "<|im_end|>", CONV(CONV_NOSYS), 1, -1,
     "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
     "<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n"
     "<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n"},
    /* --- Qwen3: ChatML; thoughts of earlier turns dropped, kept after the last user query */
    {"Qwen3-0.6B", TMPL_QWEN3, "", "<|im_end|>", CONV(CONV_SMALL), 1, -1,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n"
     "<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n"
     "<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Qwen3-0.6B (no system message)", TMPL_QWEN3, "", "<|im_end|>", CONV(CONV_NOSYS), 1, -1,
     "<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n"
     "<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Qwen3-0.6B (earlier <think> dropped)", TMPL_QWEN3, "", "<|im_end|>", CONV(CONV_THINK), 1, -1,
     "<|im_start|>system\nBe brief.<|im_end|>\n"
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\n4<|im_end|>\n"
     "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"Qwen3-0.6B (last turn keeps <think>)", TMPL_QWEN3, "", "<|im_end|>", CONV(CONV_THINK_LAST), 0, -1,
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\n<think>\nSimple arithmetic.\n</think>\n\n4<|im_end|>\n"},
    {"Qwen3-0.6B (enable_thinking=false)", TMPL_QWEN3, "", "<|im_end|>", CONV(CONV_NOSYS), 1, 0,
     "<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n"
     "<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    /* --- Gemma 2: no system role (see the error tests), assistant is "model", contents trimmed */
    {"gemma-2-2b-it", TMPL_GEMMA2, "<bos>", "<eos>", CONV(CONV_NOSYS), 1, -1,
     "<bos><start_of_turn>user\nHello<end_of_turn>\n"
     "<start_of_turn>model\nHi there<end_of_turn>\n"
     "<start_of_turn>user\nWho are you<end_of_turn>\n"
     "<start_of_turn>model\n"},
    /* --- Gemma 3: the system message is prefixed to the first user turn */
    {"gemma-3-it", TMPL_GEMMA3, "<bos>", "<eos>", CONV(CONV_SMALL), 1, -1,
     "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
     "<start_of_turn>model\nHi there<end_of_turn>\n"
     "<start_of_turn>user\nWho are you<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {"gemma-3-it (llama.cpp conversation, contents trimmed)", TMPL_GEMMA3, "<bos>", "<eos>", CONV(CONV_LLAMACPP), 1,
     -1,
     "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
     "<start_of_turn>model\nHi there<end_of_turn>\n"
     "<start_of_turn>user\nWho are you<end_of_turn>\n"
     "<start_of_turn>model\nI am an assistant<end_of_turn>\n"
     "<start_of_turn>user\nAnother question<end_of_turn>\n"
     "<start_of_turn>model\n"},
    /* --- Phi-3.5-mini */
    {"Phi-3.5-mini-instruct", TMPL_PHI35, "<s>", "<|endoftext|>", CONV(CONV_SMALL), 1, -1,
     "<|system|>\nYou are a helpful assistant<|end|>\n"
     "<|user|>\nHello<|end|>\n"
     "<|assistant|>\nHi there<|end|>\n"
     "<|user|>\nWho are you<|end|>\n"
     "<|assistant|>\n"},
    {"Phi-3.5-mini-instruct (no generation prompt: eos)", TMPL_PHI35, "<s>", "<|endoftext|>", CONV(CONV_SMALL), 0,
     -1,
     "<|system|>\nYou are a helpful assistant<|end|>\n"
     "<|user|>\nHello<|end|>\n"
     "<|assistant|>\nHi there<|end|>\n"
     "<|user|>\nWho are you<|end|>\n<|endoftext|>"},
    {"Phi-3-small (llama.cpp)", TMPL_PHI3_SMALL, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
     "<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n"
     "<|assistant|>\n"},
    /* --- Mistral v0.1 / v0.2 ([INST] with spaces; no system role) */
    {"Mistral-7B-Instruct-v0.1", TMPL_MISTRAL_V1, "<s>", "</s>", CONV(CONV_NOSYS), 1, -1,
     "<s>[INST] Hello [/INST]Hi there</s>[INST] Who are you [/INST]"},
    /* --- Mistral v3 (Mistral-7B-Instruct-v0.3 / Large-2407): system prompt joined to the last user turn */
    {"Mistral v3 (llama.cpp)", TMPL_MISTRAL_V3, "", "</s>", CONV(CONV_LLAMACPP), 1, -1,
     "[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>"
     "[INST] You are a helpful assistant\n\nAnother question[/INST]"},
    {"Mistral v3 (small conversation)", TMPL_MISTRAL_V3, "<s>", "</s>", CONV(CONV_SMALL), 1, -1,
     "<s>[INST] Hello[/INST] Hi there</s>[INST] You are a helpful assistant\n\nWho are you[/INST]"},
    /* --- Mistral Nemo (v3-tekken: no spaces around [INST]) */
    {"Mistral-Nemo-Instruct-2407", TMPL_MISTRAL_NEMO, "<s>", "</s>", CONV(CONV_SMALL), 1, -1,
     "<s>[INST]Hello[/INST]Hi there</s>[INST]You are a helpful assistant\n\nWho are you[/INST]"},
    {"Mistral-Nemo-Instruct-2407 (llama.cpp)", TMPL_MISTRAL_NEMO, "", "</s>", CONV(CONV_LLAMACPP), 1, -1,
     "[INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>"
     "[INST]You are a helpful assistant\n\nAnother question[/INST]"},
    /* --- Mistral v7 (Large-2411): [SYSTEM_PROMPT] */
    {"Mistral-Large-Instruct-2411 (llama.cpp)", TMPL_MISTRAL_V7, "", "</s>", CONV(CONV_LLAMACPP), 1, -1,
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>"
     "[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
    /* --- ChatML (OpenHermes) */
    {"ChatML / OpenHermes-2.5 (llama.cpp)", TMPL_CHATML, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
     "<|im_start|>assistant\n"},
    /* --- DeepSeek V2 */
    {"DeepSeek-V2 (llama.cpp)", TMPL_DEEPSEEK_V2, "", DS_EOS, CONV(CONV_LLAMACPP), 1, -1,
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there" DS_EOS
     "User: Who are you\n\nAssistant:    I am an assistant   " DS_EOS "User: Another question\n\nAssistant:"},
    /* --- DeepSeek V3 (-0324): system prompt after BOS, <｜User｜>/<｜Assistant｜> turns, EOS after replies */
    {"DeepSeek-V3", TMPL_DEEPSEEK_V3, DS_BOS, DS_EOS, CONV(CONV_SMALL), 1, -1,
     DS_BOS "You are a helpful assistant" DS_USER "Hello" DS_ASSISTANT "Hi there" DS_EOS DS_USER "Who are you"
            DS_ASSISTANT},
    {"DeepSeek-V3 (no generation prompt)", TMPL_DEEPSEEK_V3, DS_BOS, DS_EOS, CONV(CONV_SMALL), 0, -1,
     DS_BOS "You are a helpful assistant" DS_USER "Hello" DS_ASSISTANT "Hi there" DS_EOS DS_USER "Who are you"},
    /* --- DeepSeek V3.1: non-thinking by default, thinking with enable_thinking */
    {"DeepSeek-V3.1", TMPL_DEEPSEEK_V31, DS_BOS, DS_EOS, CONV(CONV_SMALL), 1, -1,
     DS_BOS "You are a helpful assistant" DS_USER "Hello" DS_ASSISTANT "<think></think>Hi there" DS_EOS DS_USER
            "Who are you" DS_ASSISTANT "<think></think>"},
    {"DeepSeek-V3.1 (enable_thinking)", TMPL_DEEPSEEK_V31, DS_BOS, DS_EOS, CONV(CONV_SMALL), 1, 1,
     DS_BOS "You are a helpful assistant" DS_USER "Hello" DS_ASSISTANT "<think></think>Hi there" DS_EOS DS_USER
            "Who are you" DS_ASSISTANT "<think>"},
    /* --- DeepSeek R1 (Qwen distill): earlier thoughts dropped (text after </think> kept as is) */
    {"DeepSeek-R1-Distill-Qwen-32B", TMPL_DEEPSEEK_R1_QWEN, DS_BOS, DS_EOS, CONV(CONV_SMALL), 1, -1,
     DS_BOS "You are a helpful assistant" DS_USER "Hello" DS_ASSISTANT "Hi there" DS_EOS DS_USER
            "Who are you" DS_ASSISTANT "<think>\n</think>"},
    {"DeepSeek-R1-Distill-Qwen-32B (thinking, earlier <think>)", TMPL_DEEPSEEK_R1_QWEN, DS_BOS, DS_EOS,
     CONV(CONV_THINK), 1, 1,
     DS_BOS "Be brief." DS_USER "What is 2+2?" DS_ASSISTANT "\n\n4" DS_EOS DS_USER "And 3+3?" DS_ASSISTANT
            "<think>\n"},
    /* --- more of llama.cpp's cases: whitespace control, namespaces, filters, methods */
    {"deepseek-coder-33b-instruct (llama.cpp)", TMPL_DEEPSEEK_CODER, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\n"
     "Who are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n"
     "### Response:\n"},
    {"FusionNet_34Bx2_MoE (llama.cpp)", TMPL_FUSIONNET, "<s>", "</s>", CONV(CONV_LLAMACPP), 1, -1,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you "
     "[/INST]    I am an assistant    </s><s>[INST] Another question [/INST]"},
    {"vigogne-2-70b-chat (llama.cpp)", TMPL_VIGOGNE, "", "</s>", CONV(CONV_LLAMACPP), 1, -1,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>[INST] Who are you "
     "[/INST] I am an assistant </s>[INST] Another question [/INST]"},
    {"c4ai-command-r-plus (llama.cpp)", TMPL_COMMAND_R, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi "
     "there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
     "<|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"granite-3.0-8b-instruct (llama.cpp)", TMPL_GRANITE3, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Who are you<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n"
     "<|start_of_role|>assistant<|end_of_role|>"},
    {"gemma-7b-it (llama.cpp, system merged)", TMPL_GEMMA_7B, "", "", CONV(CONV_LLAMACPP_MERGED), 1, -1,
     "<start_of_turn>user\nYou are a helpful assistant\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
     "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {"YandexGPT-5-Lite-8B-instruct (llama.cpp, system merged)", TMPL_YANDEX, "<s>", "", CONV(CONV_LLAMACPP_MERGED),
     1, -1,
     "<s> \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0\xd1\x82\xd0\xb5\xd0\xbb\xd1\x8c: You are "
     "a helpful assistant\nHello\n\n \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82: Hi "
     "there\n\n \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0\xd1\x82\xd0\xb5\xd0\xbb\xd1\x8c: "
     "Who are you\n\n \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:    I am an "
     "assistant   \n\n \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0\xd1\x82\xd0\xb5\xd0\xbb\xd1"
     "\x8c: Another question\n\n \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:[SEP]"},
    {"Seed-OSS-36B-Instruct (llama.cpp)", TMPL_SEED_OSS, "<seed:bos>", "<seed:eos>", CONV(CONV_LLAMACPP), 1, -1,
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>assistant\nHi "
     "there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an assistant<seed:eos>"
     "<seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n"},
    {"Ling-lite (llama.cpp)", TMPL_LING, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi there"
     "<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another "
     "question<role>ASSISTANT</role>"},
    {"ChatGLM4 (llama.cpp)", TMPL_CHATGLM4, "", "", CONV(CONV_LLAMACPP), 1, -1,
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are "
     "you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n"},
};

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put_escaped(const char *s, size_t from, size_t to) {
    for (size_t k = from; k < to && s[k]; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch == '\n') fputs("\\n", stderr);
        else if (ch >= 32 && ch < 127) fputc(ch, stderr);
        else fprintf(stderr, "\\x%02x", ch);
    }
}

/* Prints the first difference, escaped, so a failure is readable. */
static void show_diff(const char *exp, const char *got) {
    size_t i = 0;
    while (exp[i] && exp[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  first difference at byte %zu\n  expected: ...", i);
    put_escaped(exp, from, i + 40);
    fprintf(stderr, "\n  got:      ...");
    put_escaped(got, from, i + 40);
    fprintf(stderr, "\n");
}

static void params_for(lw_chat_params *p, const char *bos, const char *eos, int add_gen, int thinking) {
    lw_chat_params_default(p);
    p->bos_token = bos;
    p->eos_token = eos;
    p->add_generation_prompt = add_gen;
    p->enable_thinking = thinking;
    p->now = FIXED_NOW;
}

static int run_case(const chat_case *tc) {
    char err[256];
    lw_chat_template *t = NULL;
    lw_status st = lw_chat_template_parse(tc->tmpl, strlen(tc->tmpl), NULL, &t, err, sizeof err);
    CHECK_MSG(st == LW_OK, "%s: parse: %s", tc->name, err);
    if (st != LW_OK) return 0;
    lw_chat_params p;
    params_for(&p, tc->bos, tc->eos, tc->add_generation_prompt, tc->enable_thinking);
    char *out = NULL;
    size_t len = 0;
    st = lw_chat_template_render(t, tc->msgs, tc->n, &p, &out, &len);
    CHECK_MSG(st == LW_OK, "%s: render: %s", tc->name, lw_chat_template_error(t));
    int pass = 0;
    if (st == LW_OK) {
        pass = len == strlen(tc->expected) && !strcmp(out, tc->expected);
        CHECK_MSG(pass, "%s: output differs", tc->name);
        if (!pass) show_diff(tc->expected, out);
    }
    printf("  %-60s %s (%llu steps)\n", tc->name, pass ? "PASS" : "FAIL",
           (unsigned long long)lw_chat_template_last_steps(t));
    lw_chat_string_free(t, out);
    lw_chat_template_free(t);
    return pass;
}

/* ---------------------------------------------------------------------------------------------------------
 * Language features, one small template each, with the Jinja2 (Python) output written by hand
 * ------------------------------------------------------------------------------------------------------- */

typedef struct feature_case {
    const char *tmpl;     /* rendered with CONV_SMALL, bos "<s>", eos "</s>", generation prompt on */
    const char *expected; /* exact output                                                          */
} feature_case;

static const feature_case FEATURES[] = {
    /* whitespace control: trim_blocks, lstrip_blocks, {%- -%}, {{- -}}, comments, {%+ and +%} */
    {"{% if true %}\n  yes\n{% endif %}\n", "  yes\n"},
    {"a\n    {% if true %}\nb\n    {% endif %}\nc", "a\nb\nc"},
    {"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
    {"a  {{- 'x' -}}  b", "axb"},
    {"a {{ 'x' }}\nb", "a x\nb"},
    {"x {# note #}\ny", "x y"},
    {"  {# note #}\ny", "y"},
    {"  {%+ if true %}y{% endif +%}\nz", "  y\nz"},
    {"{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
    {"line\r\nnext\r\n", "line\nnext"},
    /* loops */
    {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
     "{% endfor %}",
     "10TrueFalse4;21FalseFalse4;32FalseFalse4;43FalseTrue4;"},
    {"{% for m in messages if m.role == 'user' %}{{ loop.index }}:{{ m.content }}/{{ loop.length }} {% endfor %}",
     "1:Hello/2 2:Who are you/2 "},
    {"{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
    {"{% for k, v in {'a': 1, 'b': [2, 3]}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=[2, 3];"},
    {"{% for k, v in {'x': 'y'} | items %}{{ k }}{{ v }}{% endfor %}", "xy"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}"
     "{% endfor %}",
     "0134"},
    {"{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", "uaus"},
    {"{% for c in 'h\xc3\xa9!' %}[{{ c }}]{% endfor %}", "[h][\xc3\xa9][!]"},
    {"{% for i in range(1, 10, 3) %}{{ i }}{{ loop.previtem }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}"
     "{% endfor %}",
     "14174|321"},
    /* variables, scoping, namespaces */
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"},
    {"{% set ns = namespace(x=1, y='a') %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"
     "{{ ns.y }}",
     "4a"},
    {"{% set a, b = 1, 2 %}{{ b }}{{ a }}", "21"},
    {"{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]", "[block 2]"},
    {"{% set s | upper %}shout{% endset %}{{ s }}", "SHOUT"},
    {"{% filter upper %}up {{ 'here' }}{% endfilter %}", "UP HERE"},
    /* macros */
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bo') }} "
     "{{ greet('Al', punct='?') }}",
     "Hi Bo! Hi Al?"},
    {"{% macro m(x) %}[{{ x }}]{% endmacro %}{{ m('a') ~ m('b') }}", "[a][b]"},
    /* expressions */
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}",
     "7 9 3 -4 1 2 1024 3.5"},
    {"{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0e-5 }} {{ 3.0 }} {{ -2.50 }}",
     "2.5 0.30000000000000004 1e+20 1e-05 3.0 -2.5"},
    {"{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ [1] + [2] }}", "a1NoneTrue abcd ababab [1, 2]"},
    {"{{ 'x' if false else 'y' }}{{ 'z' if true }}[{{ 'w' if false }}]", "yz[]"},
    {"{{ not true }} {{ true and 'v' }} {{ 0 or 'd' }} {{ 1 < 2 }} {{ 'b' > 'a' }} {{ 2 != 2.0 }} {{ 1 == true }}",
     "False v d True True False True"},
    {"{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}", "True True True True"},
    {"{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[9] is defined }} {{ messages[0].nope is "
     "defined }}",
     "system Who are you False False"},
    {"{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'hello'[-2:] }} {{ [1, 2, 3, 4][1::2] }} {{ 'h\xc3\xa9llo'[1] }}",
     "el olleh lo [2, 4] \xc3\xa9"},
    {"{{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ {'q': \"it's\"} }}",
     "[1, 'a', None, True, 1.5, {'k': [2]}] {'q': \"it's\"}"},
    {"{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ undefined_thing }}|",
     "<s>|</s>|True|None||"},
    /* tests */
    {"{{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is "
     "mapping }} {{ [] is iterable }} {{ x is undefined }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} "
     "{{ 1 is not string }} {{ true is boolean }} {{ 'a' is equalto 'a' }} {{ 'ab' is lower }} {{ 2 is in [1, 2] }}",
     "True True True True True True True True True True True True True True True True"},
    /* filters */
    {"{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'Hello' | upper }}|{{ 'Hello' | lower }}|"
     "{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}",
     "pad|hi|HELLO|hello|Hello World|Hello"},
    {"{{ messages | length }} {{ 'h\xc3\xa9' | length }} {{ {'a': 1} | count }} {{ x | default('dflt') }} "
     "{{ '' | default('e', true) }} {{ none | default('n') }}",
     "4 2 1 dflt e None"},
    {"{{ [3, 1, 2] | join(', ') }} {{ messages | map(attribute='role') | join('/') }} {{ [1, 2] | first }}"
     "{{ [1, 2] | last }} {{ 'abc' | list }} {{ {'a': 1} | list }}",
     "3, 1, 2 system/user/assistant/user 12 ['a', 'b', 'c'] ['a']"},
    {"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} "
     "{{ messages | rejectattr('role', 'in', ['user', 'system']) | list | length }} "
     "{{ [0, 1, 2, 3] | select('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 2, 3] | reject('even') | "
     "list }}",
     "['Hello', 'Who are you'] 1 [1, 3] [1, 'a'] [1, 3]"},
    {"{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 42 | string }} {{ '7' | int + 1 }} "
     "{{ '2.5' | float }} {{ 'x' | int }} {{ 3.9 | int }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ [1, 2, 3] | sum }}",
     "a+b+c bba 42 8 2.5 0 3 3 2.57 6"},
    {"{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 1] | "
     "unique | list }} {{ [1, 2] | reverse | list }} {{ [4, 9, 2] | max }} {{ [4, 9, 2] | min }} {% for k, v in {'b': 1, "
     "'a': 2} | dictsort %}{{ k }}{{ v }}{% endfor %}",
     "[1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] [1, 2] [2, 1] 9 2 a2b1"},
    {"{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ '<&>' | e }}|{{ 'x' | safe }}|"
     "{{ 'one two  three' | wordcount }}",
     "a\n  b|  a\n  b|&lt;&amp;&gt;|x|3"},
    /* tojson as transformers renders it: ", " and ": " separators, non-ASCII kept, insertion order */
    {"{{ {'name': 'f', 'n': 1, 'x': 1.5, 'ok': true, 'z': none, 'l': [1, 'two'], 'u': 'caf\xc3\xa9 \"q\"\\n'} | "
     "tojson }}",
     "{\"name\": \"f\", \"n\": 1, \"x\": 1.5, \"ok\": true, \"z\": null, \"l\": [1, \"two\"], \"u\": \"caf\xc3\xa9 "
     "\\\"q\\\"\\n\"}"},
    {"{{ 'caf\xc3\xa9 \xf0\x9f\x98\x80' | tojson(ensure_ascii=true) }} {{ {'\xc3\xa9': 1} | tojson(ensure_ascii=True) }}",
     "\"caf\\u00e9 \\ud83d\\ude00\" {\"\\u00e9\": 1}"},
    {"{% set q = namespace(ids=[]) %}{% set _ = q.ids.append('a') %}{% do q.ids.append('b') %}{{ q.ids.pop(0) }}"
     "{{ q.ids }}{{ [3, 4, 3].count(3) }}{{ [3, 4].index(4) }}{% set l = [1] %}{% for x in l %}{% do l.append(x) %}"
     "{% endfor %}{{ l }}",
     "a['b']21[1, 1]"},
    {"{% if false %}{{ x | nosuchfilter }}{{ y is nosuchtest }}{% endif %}ok", "ok"},
    {"{{ '{\"a\": [1, -2.5e1, \"x\\\\u00e9\\\\n\", true, null], \"b\": {}}' | from_json }}",
     "{'a': [1, -25.0, 'x\xc3\xa9\\n', True, None], 'b': {}}"},
    {"{{ {'a': [1, {'b': 2}], 'c': {}} | tojson(indent=2) }}",
     "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": {}\n}"},
    {"{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ messages[0] | tojson }}",
     "{\"a\": 2, \"b\": 1} {\"role\": \"system\", \"content\": \"You are a helpful assistant\"}"},
    /* string methods */
    {"{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ '\\n\\nx\\n'.strip('\\n') }}|"
     "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'Ab'.upper() }}"
     "{{ 'Ab'.lower() }}{{ 'ab cd'.title() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|"
     "{{ 'a-b-c'.split('-', 1) }}|{{ 'aXbX'.replace('X', '') }}",
     "x|x  |  x|x|TrueTrueTrue|ABabAb Cd|['a', 'b', '', 'c']|['a', 'b']|['a', 'b-c']|ab"},
    {"[{{ '\\u3000 x\\u00a0'.strip() }}][{{ '\\u2003a b\\u3000c'.split() }}][{{ 'x\\u00a0\\u00a0' | trim }}]"
     "[{{ '\xef\xbd\x9c" "ab\xef\xbd\x9c'.strip('\xef\xbd\x9c') }}][{{ '\xc3\xa9" "a\xc3\xa8'.strip('\xc3\xa8') }}]",
     "[x][['a', 'b', 'c']][x][ab][\xc3\xa9" "a]"},
    {"{{ '<think>r</think>\\n\\nanswer'.split('</think>')[-1].lstrip('\\n') }}|{{ 'a{}c{x}'.format('b', x='d') }}|"
     "{{ ','.join(['1', '2']) }}|{{ 'hello'.find('l') }}|{{ 'hello'.count('l') }}",
     "answer|abcd|1,2|2|2"},
    {"{{ 'aaa'.rfind('aa') }} {{ 'h\xc3\xa9llo'.find('l') }} {{ 'abc'.find('z') }} {{ 'abab'.count('') }} "
     "{{ 'a--b'.split('--') }} {{ 'xyx'.replace('', '-') }}",
     "1 2 -1 5 ['a', 'b'] -x-y-x-"},
    {"{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 'none') }} {{ {'a': 1}.get('b') }} {{ {'a': 1, 'b': 2}.keys() | "
     "list }} {{ {'a': 1}.values() | list }}",
     "1 none None ['a', 'b'] [1]"},
    /* strftime_now (UTC) and dict() */
    {"{{ strftime_now('%Y-%m-%d %H:%M:%S %a %A %b %B %y %j %%') }}",
     "2025-03-05 13:45:07 Wed Wednesday Mar March 25 064 %"},
    {"{{ dict(a=1, b='x') }}", "{'a': 1, 'b': 'x'}"},
};

static void test_features(void) {
    for (size_t i = 0; i < sizeof FEATURES / sizeof FEATURES[0]; i++) {
        const feature_case *fc = &FEATURES[i];
        chat_case tc = {"feature", fc->tmpl, "<s>", "</s>", CONV(CONV_SMALL), 1, -1, fc->expected};
        char name[64];
        snprintf(name, sizeof name, "feature #%zu", i);
        tc.name = name;
        char err[256];
        lw_chat_template *t = NULL;
        lw_status st = lw_chat_template_parse(tc.tmpl, strlen(tc.tmpl), NULL, &t, err, sizeof err);
        CHECK_MSG(st == LW_OK, "%s: parse: %s\n  template: %s", name, err, fc->tmpl);
        if (st != LW_OK) continue;
        lw_chat_params p;
        params_for(&p, tc.bos, tc.eos, 1, -1);
        char *out = NULL;
        size_t len;
        st = lw_chat_template_render(t, tc.msgs, tc.n, &p, &out, &len);
        CHECK_MSG(st == LW_OK, "%s: render: %s\n  template: %s", name, lw_chat_template_error(t), fc->tmpl);
        if (st == LW_OK) {
            bool ok = len == strlen(fc->expected) && !strcmp(out, fc->expected);
            CHECK_MSG(ok, "%s: output differs\n  template: %s", name, fc->tmpl);
            if (!ok) show_diff(fc->expected, out);
        }
        lw_chat_string_free(t, out);
        lw_chat_template_free(t);
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Errors and limits
 * ------------------------------------------------------------------------------------------------------- */

/* Parse must fail with status `st` and a message containing `needle`. */
static void expect_parse_error(const char *tmpl, lw_status st, const char *needle) {
    char err[256] = "";
    lw_chat_template *t = (lw_chat_template *)1;
    lw_status got = lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &t, err, sizeof err);
    CHECK_MSG(got == st, "parse of '%.60s': status %d, want %d (%s)", tmpl, got, st, err);
    CHECK(t == NULL);
    CHECK_MSG(strstr(err, needle) != NULL, "parse of '%.60s': message '%s' lacks '%s'", tmpl, err, needle);
    if (got == LW_OK) lw_chat_template_free(t);
}

/* Render must fail with status `st`, error kind `kind`, and a message containing `needle`. */
static void expect_render_error(const char *tmpl, const lw_chat_message *msgs, size_t n, const lw_chat_params *p,
                                lw_status st, lw_chat_error_kind kind, const char *needle) {
    char err[256] = "";
    lw_chat_template *t = NULL;
    lw_status got = lw_chat_template_parse(tmpl, strlen(tmpl), NULL, &t, err, sizeof err);
    CHECK_MSG(got == LW_OK, "parse of '%.60s' failed: %s", tmpl, err);
    if (got != LW_OK) return;
    char *out = (char *)1;
    size_t len = 1;
    double t0 = seconds();
    got = lw_chat_template_render(t, msgs, n, p, &out, &len);
    double dt = seconds() - t0;
    if (dt > 0.1) printf("  %.2f s (%llu steps) to stop: %.70s\n", dt, (unsigned long long)lw_chat_template_last_steps(t), tmpl);
    CHECK_MSG(got == st, "render of '%.60s': status %d, want %d (%s)", tmpl, got, st, lw_chat_template_error(t));
    CHECK(out == NULL && len == 0);
    CHECK_MSG(lw_chat_template_error_kind(t) == kind, "render of '%.60s': kind %d, want %d", tmpl,
              lw_chat_template_error_kind(t), kind);
    CHECK_MSG(strstr(lw_chat_template_error(t), needle) != NULL, "render of '%.60s': message '%s' lacks '%s'", tmpl,
              lw_chat_template_error(t), needle);
    if (got == LW_OK) lw_chat_string_free(t, out);
    lw_chat_template_free(t);
}

static void test_errors(void) {
    lw_chat_params p;
    params_for(&p, "<bos>", "<eos>", 1, -1);

    /* raise_exception from real templates: the message is the template's */
    expect_render_error(TMPL_GEMMA2, CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RAISED,
                        "System role not supported");
    expect_render_error(TMPL_MISTRAL_V1, CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RAISED,
                        "Conversation roles must alternate user/assistant/user/assistant/...");
    static const lw_chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
    expect_render_error(TMPL_GEMMA3, CONV(two_users), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RAISED,
                        "Conversation roles must alternate");
    expect_render_error("{{ raise_exception('custom ' ~ 42) }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG,
                        LW_CHAT_ERR_RAISED, "custom 42");

    /* syntax errors */
    /* unknown filters and tests fail when they run (a template may keep them in branches a chat never takes) */
    expect_render_error("{{ messages | nosuchfilter }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RENDER,
                        "line 1: unknown filter 'nosuchfilter'");
    expect_render_error("\n{% if x is nosuchtest %}{% endif %}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG,
                        LW_CHAT_ERR_RENDER, "line 2: unknown test 'nosuchtest'");
    expect_render_error("{% filter nosuchfilter %}x{% endfilter %}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG,
                        LW_CHAT_ERR_RENDER, "unknown filter");
    expect_render_error("{{ '{\"a\": [1,' | from_json }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG,
                        LW_CHAT_ERR_RENDER, "from_json: unexpected end");
    expect_parse_error("{% for m in messages %}{{ m.role }}", LW_ERR_INVALID_ARG, "unclosed 'for' block");
    expect_parse_error("{% if true %}\n{% for m in messages %}{% endif %}", LW_ERR_INVALID_ARG, "line 2");
    expect_parse_error("{% if true %}x{% endfor %}", LW_ERR_INVALID_ARG, "unexpected tag 'endfor'");
    expect_parse_error("{% endif %}", LW_ERR_INVALID_ARG, "endif");
    expect_parse_error("{{ 'abc }}", LW_ERR_INVALID_ARG, "unterminated string");
    expect_parse_error("{{ 1 + }}", LW_ERR_INVALID_ARG, "unexpected end of tag");
    expect_parse_error("{{ x ", LW_ERR_INVALID_ARG, "unclosed '{{'");
    expect_parse_error("{# never closed", LW_ERR_INVALID_ARG, "unclosed comment");
    expect_parse_error("{% include 'x' %}", LW_ERR_INVALID_ARG, "unknown or unexpected tag 'include'");
    expect_parse_error("{{ a $ b }}", LW_ERR_INVALID_ARG, "unexpected character");
    expect_parse_error("{{ 99999999999999999999 }}", LW_ERR_INVALID_ARG, "too large");

    /* render errors */
    expect_render_error("{{ nosuchfunction(1) }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RENDER,
                        "'nosuchfunction' is undefined");
    expect_render_error("{{ 1 + 'a' }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RENDER,
                        "unsupported operand types for +: 'int' and 'str'");
    expect_render_error("{{ 1 // 0 }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RENDER, "by zero");
    expect_render_error("{{ 'abc'.nosuchmethod() }}", CONV(CONV_SMALL), &p, LW_ERR_INVALID_ARG, LW_CHAT_ERR_RENDER,
                        "no method 'nosuchmethod'");
    expect_render_error("{{ 9223372036854775807 + 1 }}", CONV(CONV_SMALL), &p, LW_ERR_OVERFLOW, LW_CHAT_ERR_LIMIT,
                        "overflow");

    /* limits: each must stop quickly with LW_ERR_TOO_LARGE */
    lw_chat_params lim = p;
    lim.max_steps = 200000;
    expect_render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                        CONV(CONV_SMALL), &lim, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "step limit");
    lim = p;
    lim.max_memory = 8 << 20;
    expect_render_error("{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ns.s %}"
                        "{% endfor %}",
                        CONV(CONV_SMALL), &lim, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "memory limit");
    lim = p;
    lim.max_output = 1000;
    expect_render_error("{% for i in range(1000) %}0123456789{% endfor %}", CONV(CONV_SMALL), &lim,
                        LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "output exceeds");
    lim = p;
    lim.max_memory = 1 << 20;
    expect_render_error("{{ 'x' * 100000000 }}", CONV(CONV_SMALL), &lim, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT,
                        "too large");
    expect_render_error("{% set l = range(1000000) %}", CONV(CONV_SMALL), &lim, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT,
                        "memory limit");
    expect_render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", CONV(CONV_SMALL), &p,
                        LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "nested deeper");
    expect_render_error("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns | tojson }}", CONV(CONV_SMALL), &p,
                        LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "nested too deeply");

    /* algorithmic blow-ups must hit the step limit quickly (a regression would hang this test); a lower
     * limit than the default keeps the test fast, the cost per step is what matters */
    lw_chat_params fast = p;
    fast.max_steps = 500000;
    expect_render_error("{% set a = 'a' * 1000000 %}{% for i in range(100000) %}{{ (a ~ 'b') in (a ~ a) }}"
                        "{% endfor %}",
                        CONV(CONV_SMALL), &fast, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "step limit");
    expect_render_error("{% set a = 'a' * 1000000 %}{% for i in range(100000) %}{{ a.rfind('a') }}{% endfor %}",
                        CONV(CONV_SMALL), &fast, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "step limit");
    expect_render_error("{% set a = 'ab' * 1000000 %}{% for i in range(100000) %}{{ a.split('b') | length }}"
                        "{% endfor %}",
                        CONV(CONV_SMALL), &fast, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "");
    expect_render_error("{% set a = 'a' * 4000000 %}{% set b = 'a' * 4000000 %}{% for i in range(1000000) %}"
                        "{% if a == b and a.strip() and a | trim %}{% endif %}{% endfor %}",
                        CONV(CONV_SMALL), &fast, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "step limit");
    {
        /* 20000 variables and a 20000-key dict, then a million lookups of names that are not there */
        size_t cap = 1 << 20, k = 0;
        char *big = malloc(cap);
        CHECK(big != NULL);
        if (big) {
            for (int i = 0; i < 20000; i++) k += (size_t)snprintf(big + k, cap - k, "{%% set v%d = %d %%}", i, i);
            k += (size_t)snprintf(big + k, cap - k, "{%% set d = {");
            for (int i = 0; i < 20000; i++) k += (size_t)snprintf(big + k, cap - k, "'k%d': %d, ", i, i);
            k += (size_t)snprintf(big + k, cap - k, "} %%}{%% for i in range(1000000) %%}{{ x }}{{ d.y }}{%% endfor %%}");
            expect_render_error(big, CONV(CONV_SMALL), &fast, LW_ERR_TOO_LARGE, LW_CHAT_ERR_LIMIT, "step limit");
            free(big);
        }
    }
    {
        lw_chat_template *t;
        char err[256];
        const char *src = "[{{ '' * 1000000000000 }}{{ ([] * 1000000000000) | length }}]";
        CHECK(lw_chat_template_parse(src, strlen(src), NULL, &t, err, sizeof err) == LW_OK);
        char *out = NULL;
        size_t len;
        CHECK(lw_chat_template_render(t, CONV(CONV_SMALL), &p, &out, &len) == LW_OK && out && !strcmp(out, "[0]"));
        lw_chat_string_free(t, out);
        lw_chat_template_free(t);
    }

    {
        /* a dense 400 KB template (80000 outputs) parses within the parse arena's cap and renders */
        size_t reps = 80000;
        char *dense = malloc(reps * 5 + 1);
        CHECK(dense != NULL);
        if (dense) {
            for (size_t i = 0; i < reps; i++) memcpy(dense + i * 5, "{{x}}", 5);
            dense[reps * 5] = 0;
            lw_chat_template *t = NULL;
            char err[256];
            lw_status st = lw_chat_template_parse(dense, reps * 5, NULL, &t, err, sizeof err);
            CHECK_MSG(st == LW_OK, "dense template: %s", err);
            char *out = NULL;
            size_t len = 1;
            if (st == LW_OK) CHECK(lw_chat_template_render(t, CONV(CONV_SMALL), &p, &out, &len) == LW_OK && len == 0);
            lw_chat_string_free(t, out);
            lw_chat_template_free(t);
            free(dense);
        }
    }

    /* deep nesting in the parser */
    char deep[4096];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    expect_parse_error(deep, LW_ERR_TOO_LARGE, "nesting deeper");
    k = 0;
    for (int i = 0; i < 300; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{%% if 1 %%}");
    expect_parse_error(deep, LW_ERR_TOO_LARGE, "nesting deeper");

    /* one-shot API */
    char *out = NULL;
    size_t len = 0;
    char err[256];
    lw_status st = lw_chat_apply(TMPL_CHATML, CONV(CONV_NOSYS), 1, "", "", NULL, &out, &len, err, sizeof err);
    CHECK_MSG(st == LW_OK, "lw_chat_apply: %s", err);
    if (st == LW_OK) {
        CHECK(!strcmp(out, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n"
                           "<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n"));
        CHECK(len == strlen(out));
        free(out);
    }
    st = lw_chat_apply(TMPL_GEMMA2, CONV(CONV_SMALL), 1, "<bos>", "<eos>", NULL, &out, &len, err, sizeof err);
    CHECK(st == LW_ERR_INVALID_ARG && out == NULL && !strcmp(err, "System role not supported"));
    st = lw_chat_apply("{% for %}", CONV(CONV_SMALL), 1, "", "", NULL, &out, &len, err, sizeof err);
    CHECK(st == LW_ERR_INVALID_ARG && out == NULL && strstr(err, "syntax error"));
    CHECK(lw_chat_apply(NULL, CONV(CONV_SMALL), 1, "", "", NULL, &out, &len, err, sizeof err) == LW_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------------------------------------------------
 * Allocator: every byte comes back, and a failing allocator gives LW_ERR_NOMEM, never a crash
 * ------------------------------------------------------------------------------------------------------- */

typedef struct counting {
    long live;      /* allocations not yet freed             */
    long calls;     /* malloc/realloc calls                  */
    long fail_at;   /* fail the call with this index (-1 never) */
} counting;

static void *c_malloc(void *u, size_t n) {
    counting *c = u;
    if (c->calls++ == c->fail_at) return NULL;
    void *p = malloc(n);
    if (p) c->live++;
    return p;
}
static void *c_realloc(void *u, void *p, size_t n) {
    counting *c = u;
    if (c->calls++ == c->fail_at) return NULL;
    void *q = realloc(p, n);
    if (q && !p) c->live++;
    return q;
}
static void c_free(void *u, void *p) {
    counting *c = u;
    if (p) c->live--;
    free(p);
}

static void test_allocator(void) {
    counting cnt = {0, 0, -1};
    lw_allocator a = {c_malloc, c_realloc, c_free, &cnt};
    char *out = NULL;
    size_t len;
    char err[256];
    lw_status st = lw_chat_apply(TMPL_QWEN3, CONV(CONV_THINK), 1, "", "", &a, &out, &len, err, sizeof err);
    CHECK_MSG(st == LW_OK, "%s", err);
    CHECK(cnt.live == 1); /* just the output */
    if (out) a.free(a.user, out);
    CHECK(cnt.live == 0);
    long total = cnt.calls;
    CHECK(total > 2);
    /* fail each allocation in turn: always a clean error (or success if it was not needed), no leak */
    int nomem = 0;
    for (long i = 0; i < total; i++) {
        counting f = {0, 0, i};
        lw_allocator fa = {c_malloc, c_realloc, c_free, &f};
        out = NULL;
        st = lw_chat_apply(TMPL_QWEN3, CONV(CONV_THINK), 1, "", "", &fa, &out, &len, err, sizeof err);
        CHECK_MSG(st == LW_OK || st == LW_ERR_NOMEM, "failing allocation %ld: status %d (%s)", i, st, err);
        nomem += st == LW_ERR_NOMEM;
        CHECK(st == LW_OK ? out != NULL : out == NULL);
        if (out) fa.free(fa.user, out);
        CHECK_MSG(f.live == 0, "failing allocation %ld: %ld blocks leaked", i, f.live);
    }
    CHECK(nomem == total);
}

/* ---------------------------------------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------------------------------------- */

int main(void) {
    int passed = 0, n = (int)(sizeof CASES / sizeof CASES[0]);
    double t0 = seconds();
    printf("model templates:\n");
    for (int i = 0; i < n; i++) passed += run_case(&CASES[i]);
    printf("model templates: %d/%d pass\n", passed, n);
    double t1 = seconds();
    test_features();
    double t2 = seconds();
    test_errors();
    double t3 = seconds();
    test_allocator();
    double t4 = seconds();
    printf("time: templates %.2f s, features %.2f s, errors and limits %.2f s, allocator %.2f s\n", t1 - t0,
           t2 - t1, t3 - t2, t4 - t3);
    return test_summary("test-chat-template");
}
