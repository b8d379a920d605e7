#!/usr/bin/env node
// A static server for the demo page and the browser package (no dependencies):
//   node web/serve.mjs [--port N] [--host H] [--wasm DIR] [--models DIR]
// serves web/ at /, the wasm build (LW_WASM_DIR or build/wasm, as scripts/build-wasm.sh; --wasm overrides)
// at /wasm/, and optionally a folder of GGUF files at /models/ (/models/ lists them as JSON), then prints the
// demo's URL. Every answer carries COOP/COEP (cross-origin isolation: SharedArrayBuffer, wasm threads) and
// CORP headers; files are streamed, with HTTP range requests (206) so the page can read a model by chunks.
// Binds 127.0.0.1 unless --host says otherwise (WebGPU needs a secure context: localhost or https).
import { createServer } from 'node:http';
import { createReadStream, existsSync, statSync, readdirSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');

const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.wasm': 'application/wasm', '.json': 'application/json', '.svg': 'image/svg+xml', '.txt': 'text/plain; charset=utf-8',
};

// The file under dir that the URL path rel names, or null when it escapes dir or does not exist.
function inside(dir, rel) {
  const file = path.resolve(dir, '.' + path.posix.normalize('/' + rel));
  if (file !== dir && !file.startsWith(dir + path.sep)) return null;
  return existsSync(file) && statSync(file).isFile() ? file : null;
}

// Answers one file, honouring a single "Range: bytes=a-b" (also "a-" and "-n"). ETag and Last-Modified
// (from size and modification time) tell the page's model cache whether the file is the one it holds parts of.
function sendFile(req, res, file) {
  const st = statSync(file), size = st.size;
  res.setHeader('Content-Type', MIME[path.extname(file)] || 'application/octet-stream');
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('ETag', `"${size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`);
  res.setHeader('Last-Modified', st.mtime.toUTCString());
  let start = 0, end = size - 1;
  const range = req.headers.range;
  if (range) {
    const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    if (!m || (m[1] === '' && m[2] === '')) { res.statusCode = 416; res.setHeader('Content-Range', `bytes */${size}`); res.end(); return; }
    if (m[1] === '') { start = Math.max(0, size - Number(m[2])); } else { start = Number(m[1]); if (m[2] !== '') end = Math.min(end, Number(m[2])); }
    if (start > end || start >= size) { res.statusCode = 416; res.setHeader('Content-Range', `bytes */${size}`); res.end(); return; }
    res.statusCode = 206;
    res.setHeader('Content-Range', `bytes ${start}-${end}/${size}`);
  }
  res.setHeader('Content-Length', size === 0 ? 0 : end - start + 1);
  if (req.method === 'HEAD' || size === 0) { res.end(); return; }
  createReadStream(file, { start, end }).on('error', () => res.destroy()).pipe(res);
}

// Starts the server; resolves to {server, url, port}. opts: port (0: any free), host, wasmDir, modelsDir, log,
// intercept(req, res, pathname) -> true when it answered the request itself (tests: pages and faults of their
// own; the COOP/COEP/CORP headers are already set).
export async function startServer(opts = {}) {
  const web = path.join(root, 'web');
  const wasmDir = path.resolve(root, opts.wasmDir || process.env.LW_WASM_DIR || 'build/wasm');
  const modelsDir = opts.modelsDir ? path.resolve(opts.modelsDir) : null;
  const server = createServer((req, res) => {
    res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    if (req.method !== 'GET' && req.method !== 'HEAD') { res.statusCode = 405; res.end(); return; }
    let p;
    try {
      p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      res.statusCode = 400; res.end(); return;
    }
    if (opts.log) opts.log(`${req.method} ${p}${req.headers.range ? ' ' + req.headers.range : ''}`);
    if (opts.intercept && opts.intercept(req, res, p)) return;
    if (p === '/') { res.statusCode = 302; res.setHeader('Location', '/demo/'); res.end(); return; }
    if (p === '/models/' && modelsDir) {
      const list = existsSync(modelsDir) ? readdirSync(modelsDir).filter((f) => f.endsWith('.gguf'))
        .map((name) => ({ name, url: '/models/' + encodeURIComponent(name), size: statSync(path.join(modelsDir, name)).size })) : [];
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(list));
      return;
    }
    let file = null;
    if (p.startsWith('/wasm/')) file = inside(wasmDir, p.slice(6));
    else if (p.startsWith('/models/') && modelsDir) file = inside(modelsDir, p.slice(8));
    else file = inside(web, (p.endsWith('/') ? p + 'index.html' : p).slice(1));
    if (!file) { res.statusCode = 404; res.setHeader('Content-Type', 'text/plain'); res.end('not found: ' + p); return; }
    sendFile(req, res, file);
  });
  const host = opts.host || '127.0.0.1';
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8080, host, resolve);
  });
  const port = server.address().port;
  const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return { server, port, url: `http://${shown}:${port}/demo/`, wasmDir, modelsDir };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const o = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const k = a[i], v = a[i + 1];
    if (v === undefined || !['--port', '--host', '--wasm', '--models'].includes(k)) {
      console.error('usage: node web/serve.mjs [--port N] [--host H] [--wasm DIR] [--models DIR]');
      process.exit(2);
    }
    if (k === '--port') o.port = Number(v);
    else if (k === '--host') o.host = v;
    else if (k === '--wasm') o.wasmDir = v;
    else o.modelsDir = v;
  }
  startServer(o).then((s) => {
    if (!existsSync(path.join(s.wasmDir, 'llamaweb-wasm.wasm'))) {
      console.error(`serve: warning: ${s.wasmDir}/llamaweb-wasm.wasm not built (scripts/build-wasm.sh)`);
    }
    console.log(`llamaweb demo: ${s.url}  (web/ at /, wasm from ${path.relative(root, s.wasmDir) || '.'} at /wasm/` +
      `${s.modelsDir ? `, models from ${s.modelsDir} at /models/` : ''})`);
  }, (e) => {
    console.error('serve: ' + e.message);
    process.exit(1);
  });
}
