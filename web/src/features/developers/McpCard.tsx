import { Anchor, Card, Code, List, Text, Title } from '@mantine/core';
import { Link } from 'react-router-dom';
import { CodeBlock } from '../../components/common';
import { useAppContext } from '../../context';
import { MCP_TOOLS, mcpSnippets } from './mcpConnect';

/** How an MCP client connects to this deployment's `/mcp`. Shows the way only: the page never calls `/mcp`. */
export function McpCard() {
  const { project, me } = useAppContext();
  const { url, claude, cursor, python } = mcpSnippets({ origin: window.location.origin, authRequired: me.auth_required, project: project?.slug });
  return (
    <Card withBorder data-testid="mcp-card">
      <Title order={4} mb="xs">Connect an MCP client</Title>
      <Text size="sm" mb={4}>
        This deployment is an MCP server (streamable HTTP) at <Code data-testid="mcp-url">{url}</Code>, with the API's credentials and project:{' '}
        {me.auth_required ? <>an <Anchor component={Link} to="/keys">API key</Anchor> as a bearer token</> : <>no key (this deployment is open)</>}
        {project ? <>; the project's slug in <Code>X-Project</Code></> : null}. Each tool runs the REST call it mirrors, so its errors carry the API's <Code>detail</Code>.
      </Text>
      <Text size="sm" mt="sm" mb={4}>Claude Code:</Text>
      <CodeBlock code={claude} />
      <Text size="sm" mt="sm" mb={4}>Cursor, in <Code>.cursor/mcp.json</Code>:</Text>
      <CodeBlock code={cursor} />
      <Text size="sm" mt="sm" mb={4}>Python (<Code>pip install mcp</Code>):</Text>
      <CodeBlock code={python} />
      <Text size="sm" mt="sm" mb={4}>Tools:</Text>
      <List size="sm" spacing={2}>
        {MCP_TOOLS.map((t) => (
          <List.Item key={t.name}>
            <Code>{t.name}</Code>: {t.what}
          </List.Item>
        ))}
      </List>
    </Card>
  );
}
