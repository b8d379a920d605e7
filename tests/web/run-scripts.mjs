// Runs several node scripts one after the other with this node (a device call's one `node` step):
//   node tests/web/run-scripts.mjs "a.mjs args" "b.mjs args" ...
// A command's words may also be joined by commas (a.mjs,arg1,arg2): the bundle's NODE_ARGS splits on spaces.
import { spawnSync } from 'node:child_process';
for (const cmd of process.argv.slice(2)) {
  console.log(`== ${cmd}`);
  const [script, ...args] = cmd.split(/[ ,]/).filter(Boolean);
  const r = spawnSync(process.execPath, [script, ...args], { stdio: 'inherit', timeout: 280_000 });
  if (r.status !== 0) console.log(`== ${cmd}: exit ${r.status ?? r.signal}`);
}
