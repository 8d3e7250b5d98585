import { Card, Stack, Table, Text, Title } from '@mantine/core';
import type { SessionDetail } from '../../api/client';
import { EmptyState } from '../../components/common';

/**
 * What the session's last boot staged of its agent's skills source: where the tree came from
 * (a bundle and its version, a directory, a repository and ref), and each skill with where it
 * lives in the workspace. A lazy source's skills are copied there when the model loads them.
 */
export default function SkillsTab({ session }: { session: SessionDetail }) {
  const staged = session.skills;
  if (!staged) {
    return (
      <EmptyState title="No skills">
        {session.agent?.skills_source
          ? 'The session has not booted with its agent’s skills source yet.'
          : 'The agent has no skills source: give it a skill bundle, a directory or a repository to stage skills into its sessions.'}
      </EmptyState>
    );
  }
  const how = staged.lazy ? 'loaded on demand (load_skill)' : 'staged at boot';
  return (
    <Stack gap="sm" data-testid="session-skills">
      <Text size="sm">
        From <b>{staged.origin || 'the skills source'}</b> · {staged.skills.length} skill{staged.skills.length === 1 ? '' : 's'}, {how}
        {staged.announced ? ', announced to the model' : ', not announced (the agent lacks the skills capability)'}.
      </Text>
      {staged.skills.length > 0 && (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Description</Table.Th>
              <Table.Th>Path</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {staged.skills.map((k) => (
              <Table.Tr key={k.path}>
                <Table.Td>{k.name}</Table.Td>
                <Table.Td>
                  <Text size="sm" lineClamp={2}>
                    {k.description}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {k.path}
                  </Text>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      {staged.workspace_docs && (
        <Card withBorder>
          <Title order={6} mb={4}>
            Added to the instructions
          </Title>
          <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
            {staged.workspace_docs}
          </Text>
        </Card>
      )}
    </Stack>
  );
}
