// The static file side of the browser tests' and benchmarks' local HTTP servers: a URL prefix -> folder table,
// paths kept inside their folder, a MIME type by extension, Range requests (the model cache resumes and the
// range reader reads by ranges) and HEAD, files streamed from disk (a benchmark's model can be gigabytes).
// serveStatic(req, res, p, dirs): p the decoded URL path, dirs [[prefix, folder], ...]; answers the request
// (404 where no file matches).
import { createReadStream, existsSync, statSync } from 'node:fs';
import path from 'node:path';

export const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.json': 'application/json' };

export function serveStatic(req, res, p, dirs) {
  const hit = dirs.find(([pre]) => p.startsWith(pre));
  const root = hit && path.resolve(hit[1]);
  const file = hit && path.resolve(root, '.' + path.posix.normalize('/' + p.slice(hit[0].length)));
  if (!file || !(file === root || file.startsWith(root + path.sep)) || !existsSync(file) || !statSync(file).isFile()) {
    res.statusCode = 404;
    res.end();
    return;
  }
  const size = statSync(file).size;
  res.setHeader('Content-Type', MIME[path.extname(file)] || 'application/octet-stream');
  res.setHeader('Accept-Ranges', 'bytes');
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  let a = 0, b = size - 1;
  if (range) {
    a = Number(range[1]);
    b = range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
    if (a >= size || b < a) {
      res.statusCode = 416;
      res.setHeader('Content-Range', `bytes */${size}`);
      res.end();
      return;
    }
    res.statusCode = 206;
    res.setHeader('Content-Range', `bytes ${a}-${b}/${size}`);
  }
  res.setHeader('Content-Length', b - a + 1);
  if (req.method === 'HEAD' || size === 0) {
    res.end();
    return;
  }
  createReadStream(file, { start: a, end: b }).pipe(res);
}
