module cronsource.test/argo/cronhash

go 1.26
