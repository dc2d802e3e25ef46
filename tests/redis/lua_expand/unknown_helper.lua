-- A script taking a helper common.lua does not define: the build refuses it.
--@use no_such_helper
return 'OK'
