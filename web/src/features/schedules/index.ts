// What the schedules feature offers the others (an agent's page lists its schedules): the only
// module of features/schedules another feature may import (features/boundaries.test.ts).
export { AgentSchedulesTab } from './AgentSchedulesTab';
