# cmake/fuzz.cmake -- (being written: issue 4)
