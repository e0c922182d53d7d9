module flashkv

go 1.19
