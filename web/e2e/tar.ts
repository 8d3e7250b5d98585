// A tiny ustar writer for the suite's skill-bundle archives: regular files, directories and the
// hostile members (a `..` name, a symbolic link) the server must refuse. Enough of POSIX tar for
// the server's reader; node's zlib gzips it.
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

export type TarEntry = { name: string; type?: 'file' | 'dir' | 'symlink'; content?: string; linkname?: string };

function header(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512, 0);
  const put = (s: string, off: number, len: number) => h.write(s, off, Math.min(Buffer.byteLength(s), len), 'utf8');
  const octal = (n: number, off: number, len: number) => put(n.toString(8).padStart(len - 1, '0') + '\0', off, len);
  if (Buffer.byteLength(e.name) > 100) throw new Error(`tar name too long for this writer: ${e.name}`);
  put(e.name, 0, 100);
  octal(e.type === 'dir' ? 0o755 : 0o644, 100, 8);
  octal(1000, 108, 8);
  octal(1000, 116, 8);
  octal(size, 124, 12);
  octal(1_700_000_000, 136, 12);
  h.fill(0x20, 148, 156); // the checksum counts itself as spaces
  put(e.type === 'dir' ? '5' : e.type === 'symlink' ? '2' : '0', 156, 1);
  if (e.linkname) put(e.linkname, 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8);
  return h;
}

export function tar(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.type === 'file' || e.type === undefined ? Buffer.from(e.content ?? '', 'utf8') : Buffer.alloc(0);
    parts.push(header(e, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512, 0));
  }
  parts.push(Buffer.alloc(1024, 0));
  return Buffer.concat(parts);
}

export const tgz = (entries: TarEntry[]) => gzipSync(tar(entries));
export const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
