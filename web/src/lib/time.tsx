import { Text, Tooltip, type TextProps } from '@mantine/core';
import { useEffect, useState } from 'react';

const units: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 24 * 3600],
  ['month', 30 * 24 * 3600],
  ['week', 7 * 24 * 3600],
  ['day', 24 * 3600],
  ['hour', 3600],
  ['minute', 60],
  ['second', 1],
];
const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

export function relativeTime(value: string | Date, now = Date.now()): string {
  const t = typeof value === 'string' ? Date.parse(value) : value.getTime();
  if (Number.isNaN(t)) return String(value);
  const diff = Math.round((t - now) / 1000);
  const abs = Math.abs(diff);
  if (abs < 10) return 'just now';
  for (const [unit, secs] of units) {
    if (abs >= secs || unit === 'second') return rtf.format(Math.round(diff / secs), unit);
  }
  return '';
}

export function absoluteTime(value: string | Date): string {
  const d = typeof value === 'string' ? new Date(value) : value;
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

let listeners = new Set<() => void>();
let timer: ReturnType<typeof setInterval> | null = null;
function useTick() {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    listeners.add(l);
    if (!timer) timer = setInterval(() => listeners.forEach((f) => f()), 30_000);
    return () => {
      listeners.delete(l);
      if (listeners.size === 0 && timer) {
        clearInterval(timer);
        timer = null;
      }
    };
  }, []);
}

/** "3 minutes ago", with the absolute time on hover (and for screen readers, as the datetime). */
export function RelTime({ value, ...props }: { value: string | null | undefined } & TextProps) {
  useTick();
  if (!value) return <Text span c="dimmed" {...props}>—</Text>;
  return (
    <Tooltip label={absoluteTime(value)} openDelay={300}>
      <Text span component="time" dateTime={value} {...props} style={{ whiteSpace: 'nowrap' }} tabIndex={0}>
        {relativeTime(value)}
      </Text>
    </Tooltip>
  );
}

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds == null || Number.isNaN(seconds)) return '—';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

export function formatBytes(n: number | null | undefined): string {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function formatNumber(n: number | null | undefined): string {
  if (n == null) return '—';
  return new Intl.NumberFormat().format(n);
}
