import { ActionIcon, Alert, Box, Button, Card, Group, Image, Loader, ScrollArea, SimpleGrid, Stack, Text, Tooltip, UnstyledButton, Code } from '@mantine/core';
import { IconChevronDown, IconChevronRight, IconDownload, IconFile, IconFolder, IconRefresh, IconTrash, IconUpload } from '@tabler/icons-react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useEffect, useState } from 'react';
import { api, formBody, unwrap, type SessionDetail, type WorkspaceEntry } from '../../api/client';
import { keys } from '../../api/queryKeys';
import { ConfirmButton, EmptyState, ErrorAlert } from '../../components/common';
import { formatBytes } from '../../lib/time';

const Markdown = lazy(() => import('react-markdown'));

/** A file's bytes, as the typed client reads them. */
const fileContent = (sessionId: string, path: string): Promise<Blob> =>
  unwrap(api.GET('/api/sessions/{session_id}/files/content', { params: { path: { session_id: sessionId }, query: { path } }, parseAs: 'blob' }));

function baseName(path: string) {
  const parts = path.split('/').filter(Boolean);
  return parts[parts.length - 1] ?? path;
}

function Dir({ sessionId, path, depth, selected, onSelect }: { sessionId: string; path: string; depth: number; selected: string | null; onSelect: (e: WorkspaceEntry) => void }) {
  const list = useQuery({
    queryKey: keys.sessions.directory(sessionId, path),
    queryFn: () => unwrap(api.GET('/api/sessions/{session_id}/files', { params: { path: { session_id: sessionId }, query: { path } } })),
  });
  const [open, setOpen] = useState<Set<string>>(new Set());
  if (list.isPending) return <Loader size="xs" ml={depth * 16} />;
  if (list.error) return <ErrorAlert error={list.error} />;
  const entries = [...list.data].sort((a, b) => (a.kind === 'directory' ? 0 : 1) - (b.kind === 'directory' ? 0 : 1) || a.path.localeCompare(b.path));
  if (entries.length === 0 && depth === 0) return <EmptyState title="The workspace is empty">Upload a file by dropping it here, or ask the agent to write one.</EmptyState>;
  return (
    <Stack gap={0}>
      {entries.map((e) => {
        const isDir = e.kind === 'directory';
        const expanded = open.has(e.path);
        return (
          <Box key={e.path}>
            <UnstyledButton
              data-testid="file-entry"
              data-path={e.path}
              onClick={() => {
                if (isDir) {
                  const n = new Set(open);
                  if (expanded) n.delete(e.path);
                  else n.add(e.path);
                  setOpen(n);
                } else onSelect(e);
              }}
              style={{ display: 'flex', alignItems: 'center', gap: 6, paddingLeft: depth * 16 + 4, paddingBlock: 3, width: '100%', borderRadius: 4, background: selected === e.path ? 'var(--mantine-color-blue-light)' : undefined }}
            >
              {isDir ? expanded ? <IconChevronDown size={14} /> : <IconChevronRight size={14} /> : <span style={{ width: 14 }} />}
              {isDir ? <IconFolder size={16} /> : <IconFile size={16} />}
              <Text size="sm" truncate style={{ flex: 1 }}>
                {baseName(e.path)}
              </Text>
              {!isDir && (
                <Text size="xs" c="dimmed">
                  {formatBytes(e.size)}
                </Text>
              )}
            </UnstyledButton>
            {isDir && expanded && <Dir sessionId={sessionId} path={e.path} depth={depth + 1} selected={selected} onSelect={onSelect} />}
          </Box>
        );
      })}
    </Stack>
  );
}

const TEXT_EXT = /\.(txt|md|markdown|json|ya?ml|toml|py|js|ts|tsx|jsx|rs|go|sh|csv|tsv|html|css|xml|ini|cfg|log|sql|c|h|cpp|java|rb|env|ipynb)$/i;
const IMAGE_EXT = /\.(png|jpe?g|gif|webp|svg|bmp|ico)$/i;

function Preview({ sessionId, entry }: { sessionId: string; entry: WorkspaceEntry }) {
  const isImage = IMAGE_EXT.test(entry.path);
  const content = useQuery({
    queryKey: keys.sessions.fileContent(sessionId, entry.path, entry.size),
    queryFn: async () => {
      const blob = await fileContent(sessionId, entry.path);
      return { blob, text: isImage ? '' : await blob.text() };
    },
    enabled: entry.size <= 5 * 1024 * 1024,
  });
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    if (!content.data || !isImage) return;
    const type = entry.path.endsWith('.svg') ? 'image/svg+xml' : content.data.blob.type;
    const u = URL.createObjectURL(new Blob([content.data.blob], { type }));
    setUrl(u);
    return () => URL.revokeObjectURL(u);
  }, [content.data, isImage, entry.path]);

  if (entry.size > 5 * 1024 * 1024) return <Text size="sm">Too large to preview ({formatBytes(entry.size)}); download it instead.</Text>;
  if (content.isPending) return <Loader size="sm" />;
  if (content.error) return <ErrorAlert error={content.error} />;
  if (isImage) return url ? <Image src={url} alt={entry.path} maw="100%" fit="contain" /> : null;
  const text = content.data.text;
  const binary = /[\u0000-\u0008\u000e-\u001f]/.test(text.slice(0, 4096)) && !TEXT_EXT.test(entry.path);
  if (binary) return <Text size="sm">A binary file ({formatBytes(entry.size)}); download it to open it.</Text>;
  if (/\.(md|markdown)$/i.test(entry.path))
    return (
      <Suspense fallback={<Loader size="sm" />}>
        <Box className="markdown" data-testid="markdown-preview">
          <Markdown>{text}</Markdown>
        </Box>
      </Suspense>
    );
  if (/\.ipynb$/i.test(entry.path)) {
    try {
      const nb = JSON.parse(text) as { cells?: { cell_type: string; source: string | string[]; outputs?: { text?: string | string[] }[] }[] };
      return (
        <Stack gap="xs">
          {(nb.cells ?? []).map((c, i) => {
            const src = Array.isArray(c.source) ? c.source.join('') : c.source;
            return c.cell_type === 'markdown' ? (
              <Suspense key={i} fallback={null}>
                <Markdown>{src}</Markdown>
              </Suspense>
            ) : (
              <Box key={i}>
                <Code block>{src}</Code>
                {(c.outputs ?? []).map((o, j) => (
                  <Code block key={j} color="gray">
                    {Array.isArray(o.text) ? o.text.join('') : (o.text ?? '')}
                  </Code>
                ))}
              </Box>
            );
          })}
        </Stack>
      );
    } catch {
      /* fall through to text */
    }
  }
  return (
    <Code block data-testid="text-preview" style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-word' }}>
      {text}
    </Code>
  );
}

export default function FilesTab({ session }: { session: SessionDetail }) {
  const qc = useQueryClient();
  const [selected, setSelected] = useState<WorkspaceEntry | null>(null);
  const [dragging, setDragging] = useState(false);
  const stopped = session.status !== 'running';
  const refresh = () => qc.invalidateQueries({ queryKey: keys.sessions.files(session.id) });

  const upload = useMutation({
    mutationFn: async (files: File[]) => {
      for (const f of files) {
        await unwrap(
          api.POST('/api/sessions/{session_id}/files', {
            params: { path: { session_id: session.id }, query: { path: `uploads/${f.name}` } },
            body: formBody({ file: new File([f], f.name, { type: 'application/octet-stream' }) }),
          }),
        );
      }
    },
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (e: WorkspaceEntry) =>
      unwrap(api.DELETE('/api/sessions/{session_id}/files', { params: { path: { session_id: session.id }, query: { path: e.path, recursive: e.kind === 'directory' } } })),
    onSuccess: () => {
      setSelected(null);
      refresh();
    },
  });
  const downloadFile = async (e: WorkspaceEntry) => {
    const url = URL.createObjectURL(await fileContent(session.id, e.path));
    const a = document.createElement('a');
    a.href = url;
    a.download = baseName(e.path);
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };

  return (
    <Stack>
      {stopped && (
        <Alert color="gray" title="The sandbox is not running">
          You are browsing the workspace archived at the last stop; nothing is booted to read it. Upload and delete need a running sandbox.
        </Alert>
      )}
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Card
          withBorder
          data-testid="dropzone"
          aria-label="Workspace files; drop files here to upload them"
          style={dragging ? { outline: '2px dashed var(--mantine-color-blue-filled)', outlineOffset: -4 } : undefined}
          onDragOver={(e) => {
            if (stopped || !e.dataTransfer.types.includes('Files')) return;
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            if (!stopped && e.dataTransfer.files.length) upload.mutate([...e.dataTransfer.files]);
          }}
        >
          <Group justify="space-between" mb="xs">
            <Text fw={600}>Workspace {upload.isPending && <Loader size="xs" ml="xs" />}</Text>
            <ActionIcon variant="subtle" onClick={refresh} aria-label="Refresh files">
              <IconRefresh size={16} />
            </ActionIcon>
          </Group>
          <ScrollArea.Autosize mah="60vh">
            <Dir sessionId={session.id} path="." depth={0} selected={selected?.path ?? null} onSelect={setSelected} />
          </ScrollArea.Autosize>
          <Group mt="sm" gap="xs">
            <Button
              size="xs"
              variant="light"
              leftSection={<IconUpload size={14} />}
              disabled={stopped}
              onClick={() => {
                const input = document.createElement('input');
                input.type = 'file';
                input.multiple = true;
                input.onchange = () => input.files && upload.mutate([...input.files]);
                input.click();
              }}
            >
              Upload files
            </Button>
            <Text size="xs" c="dimmed">
              or drop them on the tree (they land in uploads/)
            </Text>
          </Group>
          <ErrorAlert error={upload.error} title="Upload failed" />
        </Card>
        <Card withBorder>
          {selected ? (
            <Stack>
              <Group justify="space-between" wrap="nowrap">
                <Text fw={600} ff="monospace" truncate data-testid="preview-path">
                  {selected.path}
                </Text>
                <Group gap="xs" wrap="nowrap">
                  <Tooltip label="Download">
                    <ActionIcon variant="subtle" onClick={() => downloadFile(selected)} aria-label="Download file" data-testid="download">
                      <IconDownload size={16} />
                    </ActionIcon>
                  </Tooltip>
                  {!stopped && (
                    <ConfirmButton size="compact-sm" variant="subtle" color="red" leftSection={<IconTrash size={14} />} message={`Delete ${selected.path}?`} onConfirm={() => remove.mutate(selected)} confirmLabel="Delete">
                      Delete
                    </ConfirmButton>
                  )}
                </Group>
              </Group>
              <Text size="xs" c="dimmed">
                {selected.permissions} {selected.owner}:{selected.group} · {formatBytes(selected.size)}
              </Text>
              <ErrorAlert error={remove.error} />
              <ScrollArea.Autosize mah="60vh">
                <Preview sessionId={session.id} entry={selected} />
              </ScrollArea.Autosize>
            </Stack>
          ) : (
            <EmptyState title="Pick a file">Its preview shows here: text, Markdown, images and notebooks.</EmptyState>
          )}
        </Card>
      </SimpleGrid>
    </Stack>
  );
}
