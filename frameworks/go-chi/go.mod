module fairground/go-chi

go 1.19
