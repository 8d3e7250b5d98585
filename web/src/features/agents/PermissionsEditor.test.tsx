import { screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { permissionTargets } from '../../lib/permissions';
import { renderInApp } from '../../test/render';
import { PermissionsEditor } from './PermissionsEditor';

const targets = (mcp: { server: string; tools: string[] }[]) => permissionTargets({ capabilities: [], skills: false, subagents: [], clientTools: [], mcp });

describe('MCP keys in the permissions editor', () => {
  it('lists each server and its known tools, the tools following their server', () => {
    renderInApp(<PermissionsEditor rows={{ mcp__gh: { mode: 'deny', allow_prefixes: [] } }} targets={targets([{ server: 'gh', tools: ['search'] }])} onChange={() => {}} errors={{}} />);
    expect(screen.getByTestId('permission-mcp__gh')).toHaveAttribute('data-mode', 'deny');
    expect(screen.getByTestId('permission-mcp__gh__search')).toHaveAttribute('data-mode', 'deny');
    expect(screen.getByText('MCP server')).toBeInTheDocument();
    expect(screen.getByText('MCP tool')).toBeInTheDocument();
  });

  it('takes a typed key of another tool of a server the agent has, under Ask', async () => {
    const onChange = vi.fn();
    renderInApp(<PermissionsEditor rows={{}} targets={targets([{ server: 'gh', tools: ['search'] }])} onChange={onChange} errors={{}} />);
    const input = screen.getByLabelText('MCP tool key');
    await userEvent.type(input, 'mcp__other__x{Enter}');
    expect(await screen.findByText('The agent has no MCP server other (it has gh).')).toBeInTheDocument();
    await userEvent.clear(input);
    await userEvent.type(input, 'mcp__gh__search{Enter}');
    expect(await screen.findByText('Already listed above.')).toBeInTheDocument();
    expect(onChange).not.toHaveBeenCalled();
    await userEvent.clear(input);
    await userEvent.type(input, 'mcp__gh__create_issue');
    await userEvent.click(screen.getByRole('button', { name: 'Add' }));
    expect(onChange).toHaveBeenCalledWith({ mcp__gh__create_issue: { mode: 'ask', allow_prefixes: [] } });
    expect(input).toHaveValue('');
  });

  it('offers no key to type for an agent without MCP servers', () => {
    renderInApp(<PermissionsEditor rows={{}} targets={targets([])} onChange={() => {}} errors={{}} />);
    expect(screen.queryByTestId('mcp-key-adder')).toBeNull();
  });
});
