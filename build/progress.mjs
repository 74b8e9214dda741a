#!/usr/bin/env node
// Where a long build command is (npm run build, package, setup): on a terminal one line on stderr that updates
// in place (the step and the seconds since the command began), off one a plain line a step, so a CI log reads
// the same steps in order. src/cli/progress.ts is the same for the executable's own commands.
//
// As a command: `node build/progress.mjs --prefix P --log FILE [--name N] [--steps REGEX] -- COMMAND...` runs COMMAND with
// its output into FILE, shows each line it prints as the updating line (off a terminal: each line REGEX
// matches, every line without one), ends with `P: N done in S s` (N: the command's name unless given), and exits as COMMAND exited.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";

const REDRAW_MS = 1000;

/** `{step, clear, say}`: `say` is a result line (stdout), printed with the updating line cleared first. */
export function progress(prefix, stream = process.stderr) {
  const tty = stream.isTTY === true;
  const since = Date.now();
  let text = null;
  let timer;
  const width = () => Math.max(20, (stream.columns || 80) - 1);
  const draw = () => {
    const line = `${prefix}: ${text} (${Math.floor((Date.now() - since) / 1000)} s)`;
    stream.write(`\r\x1b[K${line.slice(0, width())}`);
  };
  const clear = () => {
    clearInterval(timer);
    timer = undefined;
    if (tty && text !== null) stream.write("\r\x1b[K");
    text = null;
  };
  return {
    tty,
    step(next) {
      if (!tty) return void stream.write(`${prefix}: ${next}\n`);
      text = next;
      draw();
      timer ??= setInterval(draw, REDRAW_MS);
      timer.unref();
    },
    clear,
    say(line, out = process.stdout) {
      clear();
      out.write(`${prefix}: ${line}\n`);
    },
  };
}

function options(argv) {
  const at = argv.indexOf("--");
  const own = argv.slice(0, at < 0 ? argv.length : at);
  const value = (name) => {
    const i = own.indexOf(name);
    return i < 0 ? undefined : own[i + 1];
  };
  const command = at < 0 ? [] : argv.slice(at + 1);
  if (!command.length || !value("--prefix") || !value("--log")) {
    process.stderr.write(
      "usage: progress.mjs --prefix P --log FILE [--name N] [--steps REGEX] -- COMMAND...\n",
    );
    process.exit(2);
  }
  const steps = value("--steps");
  return {
    prefix: value("--prefix"),
    log: value("--log"),
    name: value("--name") ?? basename(command[0]),
    steps: steps ? new RegExp(steps) : null,
    command,
  };
}

async function runCommand() {
  const o = options(process.argv.slice(2));
  const p = progress(o.prefix);
  const log = createWriteStream(o.log);
  const name = o.name;
  const child = spawn(o.command[0], o.command.slice(1), { stdio: ["inherit", "pipe", "pipe"] });
  let rest = "";
  const lines = (chunk) => {
    log.write(chunk);
    const text = rest + chunk.toString("utf8");
    const all = text.split(/\r?\n|\r/);
    rest = all.pop();
    for (const line of all.map((l) => l.trim()).filter(Boolean))
      if (p.tty || !o.steps || o.steps.test(line)) p.step(`${name}: ${line}`);
  };
  child.stdout.on("data", lines);
  child.stderr.on("data", lines);
  p.step(`${name}: started`);
  const code = await new Promise((resolve) => {
    child.on("error", (e) => {
      log.write(`${e.message}\n`);
      resolve(127);
    });
    child.on("close", (status, signal) => resolve(status ?? (signal ? 128 : 1)));
  });
  await new Promise((resolve) => log.end(resolve));
  const seconds = Math.round((Date.now() - started) / 1000);
  p.clear();
  process.stderr.write(
    `${o.prefix}: ${name} ${code === 0 ? "done" : `failed (exit ${code})`} in ${seconds} s\n`,
  );
  process.exit(code);
}

const started = Date.now();
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await runCommand();
