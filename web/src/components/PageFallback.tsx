import { Center, Loader } from '@mantine/core';

/** What a page shows while its data or its code loads. */
export function PageFallback() {
  return (
    <Center py="xl">
      <Loader />
    </Center>
  );
}
