import { describe, expect, it } from 'vitest';
import { metadataPatch } from './EditSessionModal';

describe('metadataPatch', () => {
  it('sets changed keys and nulls removed ones', () => {
    expect(metadataPatch({ a: 1, b: 2, c: { x: 1 } }, { a: 1, c: { x: 2 }, d: 'new' })).toEqual({ b: null, c: { x: 2 }, d: 'new' });
  });
});
