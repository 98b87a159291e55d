export * from 'harmony-stream/server'
