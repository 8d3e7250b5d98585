// What the sessions feature offers the others (an agent's page starts sessions and lists its
// recent ones): the only module of features/sessions another feature may import
// (features/boundaries.test.ts).
export { StartSessionModal } from './StartSessionModal';
export { StatusBadge } from './StatusBadge';
