// The native llamaweb CLI for the web tests that compare against it or synthesize models with it: LW_CLI, else
// the first build directory's binary; undefined when there is none (the tests skip).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';

export const nativeCli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));

// The native CLI's generated text after prompt (`llamaweb run`; stdout: the prompt and the text, then ids).
export function cliRun(file, prompt, n, extra = []) {
  const out = execFileSync(nativeCli, ['run', '-m', file, '-p', prompt, '-n', String(n), '-t', '1', ...extra], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const text = out.slice(0, out.lastIndexOf('\nids: '));
  const at = text.indexOf(prompt);
  assert.ok(at >= 0 && at <= 1, `the CLI echoes the prompt: ${JSON.stringify(text)}`);
  return text.slice(at + prompt.length);
}
