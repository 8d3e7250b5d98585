// What the usage feature offers the others (an agent's page shows what its sessions spent):
// the only module of features/usage another feature may import (features/boundaries.test.ts).
export { AgentUsage } from './AgentUsage';
