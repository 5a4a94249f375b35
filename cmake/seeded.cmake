# cmake/seeded.cmake -- (being written: issue 4)
