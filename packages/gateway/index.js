// harmony-stream-gateway is harmony-stream's gateway as a dependency set: the code is harmony-stream/server, which
// loads this package's dependencies from here. Its main is that entry, for those who import the package itself.
module.exports = require('harmony-stream/server')
