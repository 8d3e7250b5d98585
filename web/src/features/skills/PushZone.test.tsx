import { MantineProvider } from '@mantine/core';
import { fireEvent, render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { PushZone } from './PushZone';

describe('PushZone', () => {
  it('pushes a dropped archive and a picked one, and says when a drop would land', async () => {
    const onFile = vi.fn();
    render(<MantineProvider><PushZone onFile={onFile} pending={false} /></MantineProvider>);
    const zone = screen.getByTestId('push-zone');
    const dropped = new File(['x'], 'bundle.tgz');
    fireEvent.dragEnter(zone, { dataTransfer: { files: [] } });
    expect(zone).toHaveTextContent('Drop to push it as the next version');
    fireEvent.drop(zone, { dataTransfer: { files: [dropped] } });
    expect(onFile).toHaveBeenCalledWith(dropped);
    expect(zone).toHaveTextContent('Push a version');
    const picked = new File(['y'], 'other.tar');
    await userEvent.upload(screen.getByLabelText('Archive to push'), picked);
    expect(onFile).toHaveBeenLastCalledWith(picked);
  });
  it('ignores a drop while a push is running', () => {
    const onFile = vi.fn();
    render(<MantineProvider><PushZone onFile={onFile} pending /></MantineProvider>);
    fireEvent.drop(screen.getByTestId('push-zone'), { dataTransfer: { files: [new File(['x'], 'b.tgz')] } });
    expect(onFile).not.toHaveBeenCalled();
  });
});
