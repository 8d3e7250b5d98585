import {
  ActionIcon,
  Alert,
  Button,
  Code,
  CopyButton as MCopyButton,
  Group,
  Popover,
  ScrollArea,
  Stack,
  Text,
  Title,
  Tooltip,
  type ButtonProps,
} from '@mantine/core';
import { IconAlertCircle, IconCheck, IconCopy } from '@tabler/icons-react';
import { useState, type ReactNode } from 'react';
import { ApiError } from '../api/client';

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.detail;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** An error as the API said it: its `detail`, and the status. */
export function ErrorAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const status = error instanceof ApiError ? error.status : null;
  return (
    <Alert color="red" icon={<IconAlertCircle size={18} />} title={title ?? (status ? `Error ${status}` : 'Error')} role="alert">
      <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
        {errorText(error)}
      </Text>
    </Alert>
  );
}

export function EmptyState({ title, children, action }: { title: string; children?: ReactNode; action?: ReactNode }) {
  return (
    <Stack align="center" gap="xs" py="xl" data-testid="empty-state">
      <Text fw={600}>{title}</Text>
      {children && (
        <Text c="dimmed" size="sm" ta="center" maw={520}>
          {children}
        </Text>
      )}
      {action}
    </Stack>
  );
}

export function PageHeader({ title, description, actions }: { title: ReactNode; description?: ReactNode; actions?: ReactNode }) {
  return (
    <Group justify="space-between" align="flex-start" mb="md" wrap="wrap">
      <Stack gap={4}>
        <Title order={2}>{title}</Title>
        {description && (
          <Text c="dimmed" size="sm">
            {description}
          </Text>
        )}
      </Stack>
      {actions && <Group gap="xs">{actions}</Group>}
    </Group>
  );
}

export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  return (
    <MCopyButton value={value} timeout={1500}>
      {({ copied, copy }) => (
        <Tooltip label={copied ? 'Copied' : label} withArrow>
          <ActionIcon variant="subtle" color={copied ? 'teal' : 'gray'} onClick={copy} aria-label={label}>
            {copied ? <IconCheck size={16} /> : <IconCopy size={16} />}
          </ActionIcon>
        </Tooltip>
      )}
    </MCopyButton>
  );
}

export function CodeBlock({ code, maxHeight = 400, copy = true }: { code: string; maxHeight?: number; copy?: boolean }) {
  return (
    <div style={{ position: 'relative' }}>
      <ScrollArea.Autosize mah={maxHeight} type="auto">
        <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-word' }}>
          {code}
        </Code>
      </ScrollArea.Autosize>
      {copy && (
        <div style={{ position: 'absolute', top: 4, right: 4 }}>
          <CopyButton value={code} />
        </div>
      )}
    </div>
  );
}

/** A button that asks "are you sure?" in a popover before it acts. */
export function ConfirmButton({
  children,
  message,
  onConfirm,
  confirmLabel = 'Confirm',
  ...props
}: ButtonProps & { children: ReactNode; message: ReactNode; onConfirm: () => void; confirmLabel?: string }) {
  const [opened, setOpened] = useState(false);
  return (
    <Popover opened={opened} onChange={setOpened} withArrow trapFocus position="bottom-end">
      <Popover.Target>
        <Button {...props} onClick={() => setOpened((o) => !o)}>
          {children}
        </Button>
      </Popover.Target>
      <Popover.Dropdown maw={320}>
        <Stack gap="xs">
          <Text size="sm">{message}</Text>
          <Group justify="flex-end" gap="xs">
            <Button size="xs" variant="default" onClick={() => setOpened(false)}>
              Cancel
            </Button>
            <Button
              size="xs"
              color={props.color ?? 'red'}
              onClick={() => {
                setOpened(false);
                onConfirm();
              }}
            >
              {confirmLabel}
            </Button>
          </Group>
        </Stack>
      </Popover.Dropdown>
    </Popover>
  );
}

/** A secret shown the one time the API returns it. */
export function ShownOnce({ label, value }: { label: string; value: string }) {
  return (
    <Alert color="yellow" title={label} data-testid="shown-once">
      <Stack gap="xs">
        <Text size="sm">Copy it now: it is shown only this once and cannot be read back.</Text>
        <Group gap="xs" wrap="nowrap">
          <Code style={{ wordBreak: 'break-all' }} data-testid="shown-once-value">
            {value}
          </Code>
          <CopyButton value={value} />
        </Group>
      </Stack>
    </Alert>
  );
}
