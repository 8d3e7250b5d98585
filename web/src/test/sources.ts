// The UI's own sources, for the tests that read them (query keys, feature boundaries): every
// .ts and .tsx file under src/ but declarations (and tests unless asked), as paths relative to
// src/ with `/`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/** src/ (this file lives in src/test/). */
export const SRC = join(__dirname, '..');

function walk(dir: string, tests: boolean): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return walk(path, tests);
    if (!/\.(ts|tsx)$/.test(name) || (!tests && /\.test\.tsx?$/.test(name)) || name.endsWith('.d.ts')) return [];
    return [path];
  });
}

/** The sources, and their tests too with `{ tests: true }`. */
export function sourceFiles({ tests = false } = {}): string[] {
  return walk(SRC, tests).map((path) => relative(SRC, path).split(sep).join('/'));
}

export function readSource(file: string): string {
  return readFileSync(join(SRC, file), 'utf8');
}

/** The text without its comments (block and line), so prose that names code is not taken for it. */
export function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\w\\])\/\/.*$/gm, '$1');
}

/** The 1-based line of `index` in `text`. */
export function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}
