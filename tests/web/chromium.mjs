// Test helper: headless Chromium (Debian's, with WebGPU on its SwiftShader) driven over the DevTools
// protocol through a pipe (--remote-debugging-pipe: Chromium reads commands from fd 3 and writes replies and
// events to fd 4, each one JSON text ended by a NUL byte), so no WebSocket client is needed. One browser
// process in its own process group (close() ends its helpers too) with a fresh profile unless one is given
// (the same profile again: what the origin stored, OPFS included, is still there).
//
//     const b = await launchChromium();
//     const page = await b.newPage('http://127.0.0.1:PORT/x.html');
//     const v = await page.evaluate('1 + 1');     // promises awaited, values returned by value
//     await page.reload();
//     await b.close();
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export const chromiumPath = process.env.LW_CHROMIUM || '/usr/bin/chromium';

// Why Chromium cannot run here, or null.
export function chromiumMissing() {
  return existsSync(chromiumPath) ? null : `no ${chromiumPath} (Debian package chromium; scripts/setup-webgpu.sh)`;
}

export async function launchChromium({ args = [], profile = null } = {}) {
  const dir = profile || mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-chromium-'));
  const proc = spawn(chromiumPath, ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
    '--enable-unsafe-webgpu', `--user-data-dir=${dir}`, '--remote-debugging-pipe', ...args, 'about:blank'],
  { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], detached: true });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr = (stderr + c).slice(-4000); });
  const exited = new Promise((r) => proc.on('exit', (code, sig) => r(code ?? sig)));
  const out = proc.stdio[3], inp = proc.stdio[4];
  let next = 1, pending = Buffer.alloc(0), gone = null;
  const waiting = new Map(); // id -> {resolve, reject, method}
  const listeners = new Set(); // (message) => void, for events
  inp.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (let z; (z = pending.indexOf(0)) >= 0;) {
      const msg = JSON.parse(pending.subarray(0, z).toString('utf8'));
      pending = pending.subarray(z + 1);
      const w = msg.id !== undefined && waiting.get(msg.id);
      if (w) {
        waiting.delete(msg.id);
        if (msg.error) w.reject(new Error(`${w.method}: ${msg.error.message} (${msg.error.code})`));
        else w.resolve(msg.result);
      } else for (const l of listeners) l(msg);
    }
  });
  exited.then((code) => {
    gone = new Error(`chromium exited (${code}):\n${stderr}`);
    for (const w of waiting.values()) w.reject(gone);
    waiting.clear();
  });
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    if (gone) { reject(gone); return; }
    const id = next++;
    waiting.set(id, { resolve, reject, method });
    out.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
  });
  // The next event `method` of session sessionId.
  const once = (method, sessionId) => new Promise((resolve) => {
    const l = (m) => {
      if (m.method === method && m.sessionId === sessionId) { listeners.delete(l); resolve(m.params); }
    };
    listeners.add(l);
  });
  await send('Browser.getVersion'); // the pipe works

  async function newPage(url) {
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
    const logs = [];
    listeners.add((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Runtime.consoleAPICalled') {
        logs.push(`console.${m.params.type}: ` + m.params.args.map((a) => a.value ?? a.description ?? a.type).join(' '));
      } else if (m.method === 'Runtime.exceptionThrown') {
        const d = m.params.exceptionDetails;
        logs.push('exception: ' + (d.exception && d.exception.description || d.text));
      }
    });
    const page = {
      targetId, sessionId, logs,
      send: (method, params) => send(method, params, sessionId),
      // The value of expression (a promise is awaited); a thrown error rejects with its description.
      async evaluate(expression) {
        const r = await send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, sessionId);
        if (r.exceptionDetails) {
          throw new Error('evaluate: ' + (r.exceptionDetails.exception && r.exceptionDetails.exception.description || r.exceptionDetails.text));
        }
        return r.result.value;
      },
      async goto(u) {
        const loaded = once('Page.loadEventFired', sessionId);
        const r = await send('Page.navigate', { url: u }, sessionId);
        if (r.errorText) throw new Error(`navigate ${u}: ${r.errorText}`);
        await loaded;
      },
      async reload() {
        const loaded = once('Page.loadEventFired', sessionId);
        await send('Page.reload', { ignoreCache: true }, sessionId);
        await loaded;
      },
      close: () => send('Target.closeTarget', { targetId }).catch(() => {}),
    };
    await page.send('Runtime.enable');
    await page.send('Page.enable');
    if (url) await page.goto(url);
    return page;
  }

  async function close({ keepProfile = !!profile } = {}) {
    try { process.kill(-proc.pid, 'SIGKILL'); } catch { proc.kill('SIGKILL'); }
    await exited;
    if (keepProfile) return;
    // Chromium's helpers may still be flushing the profile for a moment: retry, and never fail on it
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    } catch (e) {
      console.log(`# note: could not remove ${dir}: ${e.code}`);
    }
  }

  return { send, newPage, close, profile: dir, pid: proc.pid, stderr: () => stderr }; // pid: its process group's
}
