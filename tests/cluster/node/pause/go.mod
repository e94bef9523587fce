module dreamkeeper.test/pause

go 1.26
