import { Button, Card, Code, FileButton, Group, Stack, Text } from '@mantine/core';
import { IconUpload } from '@tabler/icons-react';
import { useState, type DragEvent } from 'react';
import { droppedFile } from './bundles';

/** Where an archive is pushed: dropped on the card, or picked with the button. */
export function PushZone({ onFile, pending }: { onFile: (f: File) => void; pending: boolean }) {
  const [over, setOver] = useState(false);
  const onDrag = (e: DragEvent, entering: boolean) => {
    e.preventDefault();
    if (!entering && e.currentTarget.contains(e.relatedTarget as Node | null)) return;
    setOver(entering);
  };
  return (
    <Card
      withBorder
      data-testid="push-zone"
      aria-label="Push a version: drop a tar or tar.gz here"
      onDragEnter={(e) => onDrag(e, true)}
      onDragOver={(e) => onDrag(e, true)}
      onDragLeave={(e) => onDrag(e, false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        const f = droppedFile(e.dataTransfer);
        if (f && !pending) onFile(f);
      }}
      style={{ borderStyle: 'dashed', borderWidth: 2, borderColor: over ? 'var(--mantine-color-blue-filled)' : undefined, background: over ? 'var(--mantine-color-blue-light)' : undefined }}
    >
      <Group justify="space-between" wrap="wrap">
        <Stack gap={2}>
          <Text fw={600}>{over ? 'Drop to push it as the next version' : 'Push a version'}</Text>
          <Text size="sm" c="dimmed">Drop a tar or tar.gz of the skills tree here, or pick one. It is checked whole before it becomes a version: no links, no <Code>..</Code>, no <Code>.git</Code>.</Text>
        </Stack>
        <FileButton onChange={(f) => f && onFile(f)} disabled={pending} inputProps={{ 'aria-label': 'Archive to push' } as never}>
          {(props) => <Button {...props} leftSection={<IconUpload size={16} />} loading={pending}>Choose an archive</Button>}
        </FileButton>
      </Group>
    </Card>
  );
}
