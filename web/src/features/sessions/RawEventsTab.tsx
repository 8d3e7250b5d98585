import { Badge, Code, Group, Text, TextInput } from '@mantine/core';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useMemo, useRef, useState } from 'react';
import { CopyButton } from '../../components/common';
import { RelTime } from '../../lib/time';
import type { EventLogState } from './events/eventLog';

export default function RawEventsTab({ log }: { log: EventLogState }) {
  const [filter, setFilter] = useState('');
  const events = useMemo(() => (filter ? log.events.filter((e) => e.type.includes(filter)) : log.events), [log.events, filter]);
  const parent = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({ count: events.length, getScrollElement: () => parent.current, estimateSize: () => 90, overscan: 10, getItemKey: (i) => events[i].seq });
  return (
    <>
      <Group mb="xs">
        <TextInput size="xs" placeholder="Filter by type, e.g. agent.tool" value={filter} onChange={(e) => setFilter(e.currentTarget.value)} aria-label="Filter events by type" w={260} />
        <Text size="xs" c="dimmed" data-testid="raw-summary">
          {log.events.length} stored events · last seq {log.lastSeq}
          {log.duplicatesDropped ? ` · ${log.duplicatesDropped} repeats dropped` : ''}
        </Text>
        <CopyButton value={JSON.stringify(events, null, 2)} label="Copy all as JSON" />
      </Group>
      <div ref={parent} style={{ height: 'calc(100vh - 330px)', overflow: 'auto', contain: 'strict' }} data-testid="raw-events">
        <div style={{ height: v.getTotalSize(), position: 'relative' }}>
          {v.getVirtualItems().map((row) => {
            const e = events[row.index];
            const json = JSON.stringify(e);
            return (
              <div key={row.key} data-index={row.index} ref={v.measureElement} data-seq={e.seq} data-testid="raw-event" style={{ position: 'absolute', top: 0, left: 0, width: '100%', transform: `translateY(${row.start}px)`, paddingBottom: 6 }}>
                <Group gap="xs" wrap="nowrap">
                  <Badge size="sm" variant="light" ff="monospace">
                    #{e.seq}
                  </Badge>
                  <Text size="sm" fw={600} ff="monospace">
                    {e.type}
                  </Text>
                  <RelTime value={e.created_at} size="xs" c="dimmed" />
                  <CopyButton value={JSON.stringify(e, null, 2)} label="Copy event JSON" />
                </Group>
                <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all', maxHeight: 160, overflow: 'auto' }}>
                  {json}
                </Code>
              </div>
            );
          })}
        </div>
      </div>
    </>
  );
}
