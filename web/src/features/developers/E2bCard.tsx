import { Anchor, Card, Code, Text, Title } from '@mantine/core';
import { Link } from 'react-router-dom';
import { CodeBlock } from '../../components/common';
import { useAppContext } from '../../context';
import { e2bSnippets } from './e2bConnect';

/** How E2B's SDKs connect to this deployment's E2B-compatible API. Shows the way only: the page never calls `/e2b`. */
export function E2bCard() {
  const { project, me } = useAppContext();
  const { apiUrl, sandboxUrl, env, python, javascript, codeInterpreter } = e2bSnippets({ origin: window.location.origin, authRequired: me.auth_required });
  return (
    <Card withBorder data-testid="e2b-card">
      <Title order={4} mb="xs">E2B SDKs</Title>
      <Text size="sm" mb={4}>
        Code written for E2B runs here unchanged: point its SDK at <Code data-testid="e2b-api-url">{apiUrl}</Code> and{' '}
        <Code data-testid="e2b-sandbox-url">{sandboxUrl}</Code>, with{' '}
        {me.auth_required ? (
          <>
            an <Anchor component={Link} to="/keys">API key</Anchor> of ours as <Code>E2B_API_KEY</Code>
          </>
        ) : (
          <>
            any <Code>E2B_API_KEY</Code> (this deployment is open; once it has an <Anchor component={Link} to="/keys">API key</Anchor>, use one)
          </>
        )}
        . Sandboxes are made in the key's project (a key made on that page is bound to {project ? <Code>{project.slug}</Code> : 'the current project'}).
      </Text>
      <CodeBlock code={env} />
      <Text size="sm" mt="sm" mb={4}>Python (<Code>pip install e2b</Code>):</Text>
      <CodeBlock code={python} />
      <Text size="sm" mt="sm" mb={4}>JavaScript (<Code>npm i e2b</Code>):</Text>
      <CodeBlock code={javascript} />
      <Text size="sm" mt="sm" mb={4}>Code interpreter (<Code>pip install e2b-code-interpreter</Code>), on this server's persistent Python kernel:</Text>
      <CodeBlock code={codeInterpreter} />
      <Text size="sm" mt="sm" data-testid="e2b-mapping">
        Each E2B sandbox is a <Anchor component={Link} to="/sessions">session</Anchor> here, titled <Code>E2B sandbox (template)</Code>, of the project's
        built-in <Code>e2b</Code> agent (template <Code>base</Code>) or <Code>e2b-code-interpreter</Code> (<Code>code-interpreter-v1</Code>); any other
        template names an environment of the project. Pause and resume keep the files, not the processes' memory. Served: sandboxes, commands,
        files and <Code>run_code</Code> with its contexts (the default context's cells are the session's notebook); sandbox hosts and signed file
        URLs with the server's <Code>--e2b-domain</Code>; terminals (<Code>pty</Code>) and <Code>commands.connect</Code>; not yet: <Code>watch_dir</Code>.
      </Text>
    </Card>
  );
}
