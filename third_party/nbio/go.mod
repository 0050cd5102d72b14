module github.com/lesismal/nbio

go 1.16

require github.com/lesismal/llib v1.2.2
